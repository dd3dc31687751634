// Dataset: labelled examples held in memory, as a dataset loader returns them, and how the
// worker turns them into batches (normalization, crops). See <towerps/registry.h> for how a
// loader is registered.
//
// Contract: value types. A Dataset holds size() examples of example_shape back to back, in one
// of two forms: `pixels` (uint8, scaled by 1/255 before normalization) or `values` (float32,
// normalized as they are); the other stays empty. labels[i] is in [0, num_classes). Validate()
// checks all of this and names the dataset and the first problem; the worker calls it on what
// a loader returns. A dataset may also hold categorical features: `fields` 64-bit ids per
// example, for a model's embedding tables (<towerps/model_builder.h>).
#ifndef TOWERPS_DATASET_H_
#define TOWERPS_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "towerps/shape.h"
#include "towerps/status.h"

namespace towerps {

struct Dataset {
  std::string name;     // for messages, e.g. "fashion-mnist/train"
  Shape example_shape;  // [c, h, w] for images, [features] for vectors
  int num_classes = 10;
  std::vector<uint8_t> pixels;  // size() * example_size() bytes, CHW per example; or
  std::vector<float> values;    // size() * example_size() floats
  std::vector<int32_t> labels;  // size()
  // Categorical features, for a model's embedding tables: `fields` ids per example
  // (size() * fields, example after example); none when fields is 0.
  int fields = 0;
  std::vector<uint64_t> ids;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t example_size() const { return NumElements(example_shape); }
  bool is_float() const { return !values.empty(); }

  Status Validate() const;
};

// How examples become a model's inputs: x = (v - mean[c]) / stddev[c], where v is pixel / 255 or
// the float value and c the channel of an image [c, h, w] or the feature of a vector [features],
// then the crop. --export-npz stores the statistics used ("normalization/mean", "/stddev").
struct Preprocessing {
  // One per channel (per feature), or one for all. Empty: computed per channel (per feature)
  // from the training set.
  std::vector<float> mean, stddev;
  int crop_h = 0, crop_w = 0;     // 0: no crop. Evaluation takes the centre crop.
  bool random_crop_flip = false;  // training takes random crops and horizontal flips
};

// What a dataset loader returns: the two splits and their preprocessing.
struct DataSplits {
  Dataset train, test;
  Preprocessing preprocessing;
};

}  // namespace towerps

#endif  // TOWERPS_DATASET_H_
