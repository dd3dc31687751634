// EventWriter: TensorBoard event files, so that `tensorboard --logdir D` shows a job's curves.
//
// A file is a sequence of TFRecords (TensorFlow's record framing): the data's length as a
// little-endian uint64, the masked CRC-32C of those 8 bytes (uint32), the data, the masked
// CRC-32C of the data. Each record's data is one `Event` protocol buffer (tensorflow/core/util/
// event.proto): wall_time (field 1, double), step (2, int64), and either file_version (3, the
// first record: "brain.Event:2") or a Summary (5) of Values, each a tag (1) with a simple_value
// (2, float) or a histogram (5: HistogramProto's min, max, num, sum, sum_squares, bucket_limit,
// bucket). The few fields written are encoded here by hand, in protobuf's wire format (varints,
// fixed64 doubles, fixed32 floats, length-delimited and packed fields): the format is stable and
// public, and tests read the files back with the protobuf library itself. CRC-32C (Castagnoli)
// comes from Boost.CRC.
//
// Contract: one writer per file, named "events.out.tfevents.<unix seconds>.<host>.<pid>" in its
// directory (TensorBoard reads every file of a run directory, so a restarted process adds a file
// beside its predecessor's). Each event is written whole and flushed, so a killed process keeps
// what it wrote. Errors are kIoError naming the file. Not thread-safe: one owner.
#ifndef TOWERPS_COMMON_EVENT_WRITER_H_
#define TOWERPS_COMMON_EVENT_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "towerps/result.h"

namespace towerps {

class EventWriter {
 public:
  // Creates `dir` (and its parents) and a new event file in it, beginning with the file_version
  // event.
  static Result<std::unique_ptr<EventWriter>> Create(const std::string& dir);
  ~EventWriter();
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One event at `step` holding a scalar per (tag, value); non-finite values are written as they
  // are (TensorBoard shows NaN).
  Status Scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // One event at `step` holding a histogram of integers: counts[i] values equal to i, the last
  // bucket counting i or more (a staleness histogram).
  Status Histogram(int64_t step, const std::string& tag, const std::vector<uint64_t>& counts);

  const std::string& path() const { return path_; }

 private:
  EventWriter(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  Status WriteEvent(int64_t step, std::string_view payload_fields);

  std::FILE* file_;
  std::string path_;
};

// The record framing and its checksum, for the writer and its tests.
uint32_t MaskedCrc32c(std::string_view data);
std::string TfRecord(std::string_view data);

}  // namespace towerps

#endif  // TOWERPS_COMMON_EVENT_WRITER_H_
