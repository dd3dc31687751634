#include "worker/train/npz_export.h"

#include <zip.h>

#include <cstdio>
#include <filesystem>
#include <memory>

namespace towerps::worker {
namespace {

// Owns an open archive; discards it (writing nothing) unless Close() succeeded.
struct ZipDiscard {
  void operator()(zip_t* z) const { zip_discard(z); }
};

std::string ZipErrorText(zip_t* z) { return zip_strerror(z); }

}  // namespace

std::string NpyHeader(const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3, 4); a 1-d shape keeps "(5,)"
  if (shape.size() == 1) dims.resize(dims.size() - 1);
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n' is a multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict.push_back('\n');
  std::string header = "\x93NUMPY";
  header.push_back('\x01');
  header.push_back('\x00');
  header.push_back(static_cast<char>(dict.size() & 0xff));
  header.push_back(static_cast<char>(dict.size() >> 8));
  return header + dict;
}

Status WriteNpz(const std::vector<ps::VariableSpec>& variables, const std::vector<Tensor>& values,
                const std::string& path) {
  const std::string what = "--export-npz " + path;
  if (variables.size() != values.size()) {
    return InternalError(what + ": " + std::to_string(values.size()) + " values for " +
                         std::to_string(variables.size()) + " variables");
  }
  const std::string tmp = path + ".tmp";
  int err = 0;
  std::unique_ptr<zip_t, ZipDiscard> zip(zip_open(tmp.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err));
  if (!zip) {
    zip_error_t e;
    zip_error_init_with_code(&e, err);
    const std::string reason = zip_error_strerror(&e);
    zip_error_fini(&e);
    return IoError(what + ": cannot create " + tmp + ": " + reason);
  }
  // libzip reads the members' bytes at zip_close: they live here until then.
  std::vector<std::string> members(variables.size());
  for (size_t i = 0; i < variables.size(); ++i) {
    const ps::VariableSpec& v = variables[i];
    const Tensor& t = values[i];
    if (t.num_elements() != NumElements(v.shape)) {
      return InternalError(what + ": " + v.name + " has " + std::to_string(t.num_elements()) +
                           " values for its shape " + ShapeToString(v.shape));
    }
    members[i] = NpyHeader(v.shape);
    members[i].append(static_cast<const char*>(t.raw_data()), t.byte_size());
    zip_source_t* src = zip_source_buffer(zip.get(), members[i].data(), members[i].size(), 0);
    if (src == nullptr) return IoError(what + ": " + ZipErrorText(zip.get()));
    const zip_int64_t index =
        zip_file_add(zip.get(), (v.name + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8);
    if (index < 0) {
      zip_source_free(src);
      return IoError(what + ": cannot add " + v.name + ": " + ZipErrorText(zip.get()));
    }
    if (zip_set_file_compression(zip.get(), static_cast<zip_uint64_t>(index), ZIP_CM_STORE, 0) !=
        0) {
      return IoError(what + ": " + ZipErrorText(zip.get()));
    }
  }
  if (zip_close(zip.get()) != 0) {
    const std::string reason = ZipErrorText(zip.get());
    std::remove(tmp.c_str());
    return IoError(what + ": writing " + tmp + " failed: " + reason);
  }
  (void)zip.release();  // closed
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return IoError(what + ": cannot rename " + tmp + " over it: " + ec.message());
  }
  return Status::Ok();
}

Status WriteNpz(const Model<float>& model, const std::string& path) {
  std::vector<Tensor> values;
  for (int v = 0; v < model.num_variables(); ++v) values.push_back(model.GetVariable(v));
  return WriteNpz(model.variables(), values, path);
}

}  // namespace towerps::worker
