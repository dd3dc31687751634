#include "worker/data/criteo_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>

#include "common/hash.h"
#include "common/splitmix.h"

namespace towerps::worker {
namespace {

constexpr int kFields = 1 + kCriteoIntegerFeatures + kCriteoCategoricalFeatures;  // 40

// "field 4 (I3)": the field's 1-based position in the line and its name in the format.
std::string FieldName(int index) {
  std::string name = index == 0                        ? "label"
                     : index <= kCriteoIntegerFeatures ? "I" + std::to_string(index)
                                                       : "C" + std::to_string(index - 13);
  return "field " + std::to_string(index + 1) + " (" + name + ")";
}

// At most 40 bytes of a field, for messages (a bad line may be anything).
std::string Quoted(std::string_view value) {
  std::string q(value.substr(0, 40));
  if (value.size() > 40) q += "...";
  return "'" + q + "'";
}

}  // namespace

uint64_t CriteoCategoricalId(int field, std::string_view value) {
  const unsigned char f = static_cast<unsigned char>(field);
  // FNV-1a spreads the bytes; the SplitMix64 finalizer mixes every bit into every other, so
  // that the servers' placement by id hash balances the rows of each field.
  return SplitMix64Finalize(Fnv1a(value.data(), value.size(), Fnv1a(&f, 1)));
}

Status ParseCriteoLine(std::string_view line, int32_t* label, float* dense, uint64_t* ids) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const int tabs = static_cast<int>(std::count(line.begin(), line.end(), '\t'));
  if (tabs != kFields - 1) {
    std::string message = "has " + std::to_string(tabs + 1) + " tab-separated fields, not " +
                          std::to_string(kFields) + " (a label, 13 integers, 26 categories)";
    if (tabs == kFields - 2) {
      message +=
          "; a file without labels, such as the Kaggle set's test.txt, cannot be used: "
          "split labelled lines off train.txt instead";
    }
    return InvalidArgumentError(message);
  }
  size_t begin = 0;
  for (int f = 0; f < kFields; ++f) {
    const size_t end = std::min(line.find('\t', begin), line.size());
    const std::string_view value = line.substr(begin, end - begin);
    begin = end + 1;
    if (f == 0) {
      if (value != "0" && value != "1") {
        return InvalidArgumentError(FieldName(f) + " is " + Quoted(value) + ", not 0 or 1");
      }
      *label = value == "1" ? 1 : 0;
    } else if (f <= kCriteoIntegerFeatures) {
      int64_t x = 0;
      if (!value.empty()) {
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
        if (ec != std::errc() || ptr != value.data() + value.size()) {
          return InvalidArgumentError(FieldName(f) + " is " + Quoted(value) + ", not an integer");
        }
      }
      dense[f - 1] = static_cast<float>(std::log1p(static_cast<double>(std::max<int64_t>(x, 0))));
    } else {
      ids[f - 1 - kCriteoIntegerFeatures] =
          CriteoCategoricalId(f - 1 - kCriteoIntegerFeatures, value);
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<CriteoStream>> CriteoStream::Open(const std::string& path,
                                                         const CriteoOptions& options) {
  std::unique_ptr<CriteoStream> s(new CriteoStream(path, options));
  if (!s->in_) return NotFoundError(path + ": cannot open");
  return s;
}

CriteoStream::CriteoStream(std::string path, CriteoOptions options)
    : path_(std::move(path)), options_(options), in_(path_, std::ios::binary) {}

Result<int64_t> CriteoStream::Read(int64_t max, Dataset* chunk) {
  chunk->example_shape = {kCriteoIntegerFeatures};
  chunk->num_classes = 2;
  chunk->fields = kCriteoCategoricalFeatures;
  int64_t n = 0;
  int32_t label = 0;
  float dense[kCriteoIntegerFeatures];
  uint64_t ids[kCriteoCategoricalFeatures];
  while (n < max && std::getline(in_, line_)) {
    ++stats_.lines;
    if (Status s = ParseCriteoLine(line_, &label, dense, ids); !s.ok()) {
      const std::string where = "line " + std::to_string(stats_.lines) + ": " + s.message();
      if (!options_.skip_bad_lines) {
        return InvalidArgumentError(path_ + ":" + std::to_string(stats_.lines) + ": " +
                                    s.message() + " (--skip-bad-lines skips such lines)");
      }
      if (stats_.skipped++ == 0) stats_.first_skipped = where;
      continue;
    }
    chunk->labels.push_back(label);
    chunk->values.insert(chunk->values.end(), dense, dense + kCriteoIntegerFeatures);
    chunk->ids.insert(chunk->ids.end(), ids, ids + kCriteoCategoricalFeatures);
    ++n;
  }
  if (in_.bad()) {
    return IoError(path_ + ": read failed after line " + std::to_string(stats_.lines));
  }
  return n;
}

std::string CriteoStream::Notes() const {
  if (stats_.skipped == 0) return "";
  return path_ + ": skipped " + std::to_string(stats_.skipped) + " malformed line(s) of " +
         std::to_string(stats_.lines) + " (--skip-bad-lines); the first, " + stats_.first_skipped;
}

Result<Dataset> ReadCriteoStream(CriteoStream& stream, const std::string& name) {
  Dataset d;
  d.name = name;
  for (;;) {
    TOWERPS_ASSIGN_OR_RETURN(const int64_t n, stream.Read(int64_t{1} << 20, &d));
    if (n == 0) break;
  }
  if (d.labels.empty()) {
    const CriteoReadStats& st = stream.stats();
    return InvalidArgumentError(stream.path() + ": no examples (" + std::to_string(st.lines) +
                                " lines, " + std::to_string(st.skipped) + " skipped)");
  }
  return d;
}

Result<Dataset> ReadCriteoFile(const std::string& path, const std::string& name,
                               const CriteoOptions& options, CriteoReadStats* stats) {
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<CriteoStream> stream, CriteoStream::Open(path, options));
  Result<Dataset> d = ReadCriteoStream(*stream, name);
  if (stats != nullptr) *stats = stream->stats();
  return d;
}

}  // namespace towerps::worker
