#include "worker/train/npz_export.h"

#include <algorithm>

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

std::string NpyHeaderText(const std::vector<int64_t>& shape, DType dtype) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3, 4); a 1-d shape keeps "(5,)"
  if (shape.size() == 1) dims.resize(dims.size() - 1);
  const char* descr = dtype == DType::kUInt64 ? "<u8" : "<f4";
  std::string dict =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
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

Status WriteNpz(const std::vector<NpzMember>& arrays, const std::string& path) {
  const std::string what = "--export-npz " + path;
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
  std::vector<std::string> members(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    const NpzMember& v = arrays[i];
    const Tensor& t = v.values;
    if (t.dtype() != DType::kFloat32 && t.dtype() != DType::kUInt64) {
      return InternalError(what + ": " + v.name + " is " + DTypeName(t.dtype()));
    }
    members[i] = NpyHeaderText(t.shape(), t.dtype());
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

namespace {

// A joined table's rows (ps::VariableSpec::segments) as each segment's: "<segment>/ids", less the
// segment's offset, and "<segment>/rows", in the order held.
void AddSegments(const ps::VariableSpec& v, const ps::HeldRows& t, std::vector<NpzMember>* out) {
  const int64_t n = t.ids.defined() ? t.ids.num_elements() : 0;
  const int64_t dim = v.table_dim();
  std::vector<uint64_t> starts;
  uint64_t start = 0;
  for (const ps::TableSegment& s : v.segments) {
    starts.push_back(start);
    start += static_cast<uint64_t>(s.rows);
  }
  std::vector<size_t> segment(static_cast<size_t>(n));
  std::vector<int64_t> count(starts.size());
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t id = t.ids.u64()[i];
    segment[i] =
        static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), id) - starts.begin()) -
        1;
    ++count[segment[i]];
  }
  std::vector<Tensor> ids, rows;
  for (int64_t c : count) {
    ids.push_back(Tensor::Empty({c}, DType::kUInt64));
    rows.push_back(Tensor::Empty({c, dim}));
  }
  std::vector<int64_t> at(starts.size());
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = segment[i];
    ids[k].u64()[at[k]] = t.ids.u64()[i] - starts[k];
    std::copy_n(t.values.f32() + i * dim, dim, rows[k].f32() + at[k] * dim);
    ++at[k];
  }
  for (size_t k = 0; k < starts.size(); ++k) {
    out->push_back({v.segments[k].name + "/ids", std::move(ids[k])});
    out->push_back({v.segments[k].name + "/rows", std::move(rows[k])});
  }
}

}  // namespace

std::vector<NpzMember> NpzArrays(const std::vector<ps::VariableSpec>& variables,
                                 const std::vector<Tensor>& values,
                                 const std::vector<ps::HeldRows>& tables,
                                 std::vector<NpzMember> extra) {
  std::vector<NpzMember> arrays;
  for (size_t i = 0; i < variables.size(); ++i) {
    const ps::VariableSpec& v = variables[i];
    if (!v.is_table()) {
      arrays.push_back({v.name, values.at(i).Reshape(v.shape)});
      continue;
    }
    const ps::HeldRows& t = tables.at(i);
    if (!v.segments.empty()) {
      AddSegments(v, t, &arrays);
      continue;
    }
    const int64_t n = t.ids.defined() ? t.ids.num_elements() : 0;
    arrays.push_back({v.name + "/ids", n > 0 ? t.ids : Tensor::Empty({0}, DType::kUInt64)});
    arrays.push_back({v.name + "/rows", n > 0 ? t.values.Reshape({n, v.table_dim()})
                                              : Tensor::Empty({0, v.table_dim()})});
  }
  for (NpzMember& a : extra) arrays.push_back(std::move(a));
  return arrays;
}

std::vector<NpzMember> NormalizationArrays(const std::vector<float>& mean,
                                           const std::vector<float>& stddev) {
  auto array = [](const std::string& name, const std::vector<float>& v) {
    Tensor t = Tensor::Empty({static_cast<int64_t>(v.size())});
    std::copy(v.begin(), v.end(), t.f32());
    return NpzMember{name, std::move(t)};
  };
  return {array("normalization/mean", mean), array("normalization/stddev", stddev)};
}

Status WriteNpz(const Model<float>& model, const std::vector<ps::HeldRows>* tables,
                std::vector<NpzMember> extra, const std::string& path) {
  std::vector<ps::VariableSpec> variables(model.variables().begin(),
                                          model.variables().begin() + model.num_variables());
  std::vector<Tensor> values;
  for (int v = 0; v < model.num_variables(); ++v) values.push_back(model.GetVariable(v));
  std::vector<ps::HeldRows> rows(variables.size());
  if (tables != nullptr) {
    for (int t = 0; t < model.num_tables(); ++t) {
      variables.push_back(model.variables()[static_cast<size_t>(model.table_variable(t))]);
      values.emplace_back();
      rows.push_back(tables->at(static_cast<size_t>(t)));
    }
  }
  return WriteNpz(NpzArrays(variables, values, rows, std::move(extra)), path);
}

}  // namespace towerps::worker
