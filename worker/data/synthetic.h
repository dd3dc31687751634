// A seeded synthetic dataset for benchmarks and tests: `size` examples of `example_shape` bytes,
// labels uniform in [0, num_classes), and pixels drawn around a per-class pattern so that a model
// can learn something. Same options, same bytes, on every platform. Thread-safe (pure function).
#ifndef TOWERPS_WORKER_DATA_SYNTHETIC_H_
#define TOWERPS_WORKER_DATA_SYNTHETIC_H_

#include "towerps/dataset.h"
#include "towerps/result.h"

namespace towerps::worker {

struct SyntheticOptions {
  int64_t size = 1024;
  Shape example_shape = {1, 28, 28};
  int num_classes = 10;
  uint64_t seed = 1;
};

// kInvalidArgument for a non-positive size, shape or class count (or more than 256 classes).
Result<Dataset> MakeSyntheticDataset(const SyntheticOptions& options);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_SYNTHETIC_H_
