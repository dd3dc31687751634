// Dataset: labelled images held in memory as bytes, as the readers produce them.
//
// Contract: value type. pixels holds size() examples of example_shape ([c, h, w], CHW bytes)
// back to back; labels[i] < num_classes (the readers check this).
#ifndef TOWERPS_WORKER_DATA_DATASET_H_
#define TOWERPS_WORKER_DATA_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"

namespace towerps::worker {

struct Dataset {
  std::string name;     // "fashion-mnist/train", for messages
  Shape example_shape;  // [c, h, w]
  int num_classes = 10;
  std::vector<uint8_t> pixels;
  std::vector<uint8_t> labels;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t example_size() const { return NumElements(example_shape); }
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_DATASET_H_
