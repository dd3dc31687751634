// Reader for the Criteo click-log format, which the Criteo Kaggle (Display Advertising Challenge)
// and Terabyte sets use and users bring: one example a line, tab-separated,
//
//   label  I1 .. I13  C1 .. C26
//
// a 0/1 label, 13 integer features and 26 categorical features (hex strings such as "68fd1e64";
// any bytes but a tab are accepted), any feature possibly empty. What a model sees is what DLRM
// (Naumov et al. 2019) feeds its networks:
//  - each integer x becomes log(1 + max(x, 0)), an empty one 0: the 13 dense features;
//  - each categorical value is hashed with its field to a 64-bit id (CriteoCategoricalId), an
//    empty one to its field's own "missing" id: the 26 ids, field after field, for the model's
//    embedding tables. Ids of different fields never share a row by construction (up to a 64-bit
//    hash collision), so one table may hold every field.
//
// Contract: reads the file line by line (memory grows with the examples kept, not with the
// file's text). A malformed line (a field count other than 40, a label other than 0 or 1, an
// integer field that is not an integer) is kInvalidArgument naming the file, the line and the
// field, e.g. "train.txt:17: field 4 (I3) is 'x12', not an integer", unless skip_bad_lines, which
// skips it and counts it. A missing file is kNotFound. Thread-compatible; pure but for the file.
#ifndef TOWERPS_WORKER_DATA_CRITEO_READER_H_
#define TOWERPS_WORKER_DATA_CRITEO_READER_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "towerps/dataset.h"
#include "towerps/example_stream.h"
#include "towerps/result.h"

namespace towerps::worker {

inline constexpr int kCriteoIntegerFeatures = 13;
inline constexpr int kCriteoCategoricalFeatures = 26;

struct CriteoOptions {
  bool skip_bad_lines = false;  // skip malformed lines, counting them, instead of failing
};

// What reading a file found besides its examples.
struct CriteoReadStats {
  int64_t lines = 0;          // read, skipped ones included
  int64_t skipped = 0;        // malformed lines skipped (skip_bad_lines)
  std::string first_skipped;  // why the first of them was bad, "line 17: field 4 (I3) ..."
};

// The id of categorical field `field` (0-based, C1 is 0) holding `value` ("" when empty).
uint64_t CriteoCategoricalId(int field, std::string_view value);

// One line without its newline (a trailing '\r' is dropped): its label, 13 dense features and 26
// ids. kInvalidArgument naming the field, "field 4 (I3) is 'x12', not an integer", without the
// file and line, which the caller adds.
Status ParseCriteoLine(std::string_view line, int32_t* label, float* dense, uint64_t* ids);

// `path`'s lines in order, a chunk at a time (<towerps/example_stream.h>): each Read appends up
// to `max` examples of the layout below, skipping or refusing malformed lines as the options
// say. kNotFound when the file cannot be opened.
class CriteoStream : public ExampleStream {
 public:
  static Result<std::unique_ptr<CriteoStream>> Open(const std::string& path,
                                                    const CriteoOptions& options);
  Result<int64_t> Read(int64_t max, Dataset* chunk) override;
  // "path: skipped 3 malformed line(s) of 1000 (--skip-bad-lines); the first, line 17: ..."
  std::string Notes() const override;
  const CriteoReadStats& stats() const { return stats_; }
  const std::string& path() const { return path_; }

 private:
  CriteoStream(std::string path, CriteoOptions options);
  std::string path_;
  CriteoOptions options_;
  std::ifstream in_;
  std::string line_;
  CriteoReadStats stats_;
};

// The rest of `stream`'s lines as a Dataset named `name`: example_shape {13}, float values, 26
// fields of ids, 2 classes. kInvalidArgument when it holds no example.
Result<Dataset> ReadCriteoStream(CriteoStream& stream, const std::string& name);

// Every line of `path` as such a Dataset. `stats` may be null.
Result<Dataset> ReadCriteoFile(const std::string& path, const std::string& name,
                               const CriteoOptions& options, CriteoReadStats* stats);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_CRITEO_READER_H_
