// ExampleStream: a split's examples read in order, a chunk at a time, for data larger than
// memory. A dataset that can be read so (DatasetDef::open, <towerps/registry.h>) streams through
// the worker's shuffle buffer when the job asks for one (--shuffle-buffer N): each worker reads
// the split from its beginning every epoch, keeps its share of the examples, and draws them in a
// seeded order from a buffer of N, so that memory holds N examples, not the file.
//
// Contract: owned by one thread. Read appends to `chunk` (a Dataset of the split's layout:
// example_shape, values or pixels, labels or targets, ids, multi-hot fields, num_classes set on
// the first read) and returns how many it appended, 0 at the end of the split; a malformed or
// unreadable input is an error naming the file and the line or record. Reading the same split
// again from its beginning (a new stream) gives the same examples in the same order.
#ifndef TOWERPS_EXAMPLE_STREAM_H_
#define TOWERPS_EXAMPLE_STREAM_H_

#include <cstdint>
#include <string>

#include "towerps/dataset.h"
#include "towerps/result.h"

namespace towerps {

class ExampleStream {
 public:
  virtual ~ExampleStream() = default;
  // Appends up to `max` (>= 1) of the next examples to `chunk`; 0 once the split is over.
  virtual Result<int64_t> Read(int64_t max, Dataset* chunk) = 0;
  // What the reader passed over so far that a user should hear of (malformed lines it skipped,
  // say), one line for the log; empty when nothing.
  virtual std::string Notes() const { return ""; }
};

}  // namespace towerps

#endif  // TOWERPS_EXAMPLE_STREAM_H_
