// Dataset: labelled examples held in memory, as a dataset loader returns them, and how the
// worker turns them into batches (normalization, crops). See <towerps/registry.h> for how a
// loader is registered.
//
// Contract: value types. A Dataset holds size() examples of example_shape back to back, in one
// of two forms: `pixels` (uint8, scaled by 1/255 before normalization) or `values` (float32,
// normalized as they are); the other stays empty. labels[i] is in [0, num_classes); a regression
// dataset holds float `targets` instead of labels (then num_classes is not used). Validate()
// checks all of this and names the dataset and the first problem; the worker calls it on what
// a loader returns. A dataset may also hold categorical features: `fields` 64-bit ids per
// example, for a model's embedding tables, and multi-hot fields of any number of ids per example,
// for its EmbeddingBag tables (<towerps/model_builder.h>).
#ifndef TOWERPS_DATASET_H_
#define TOWERPS_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "towerps/shape.h"
#include "towerps/status.h"

namespace towerps {

// A multi-hot field: example i's ids are ids[offsets[i] .. offsets[i + 1]), offsets[0] = 0 and
// never decreasing (size() + 1 of them); an example may have none.
struct MultiHotField {
  std::vector<uint64_t> offsets;
  std::vector<uint64_t> ids;
};

struct Dataset {
  std::string name;     // for messages, e.g. "fashion-mnist/train"
  Shape example_shape;  // [c, h, w] for images, [features] for vectors
  int num_classes = 10;
  std::vector<uint8_t> pixels;  // size() * example_size() bytes, CHW per example; or
  std::vector<float> values;    // size() * example_size() floats
  std::vector<int32_t> labels;  // size(); or, for regression, empty and
  std::vector<float> targets;   // size() finite targets (LossKind::kMeanSquaredError)
  // Categorical features, for a model's embedding tables: `fields` ids per example
  // (size() * fields, example after example); none when fields is 0.
  int fields = 0;
  std::vector<uint64_t> ids;
  // Multi-hot fields, one per EmbeddingBag table, in the model's order; none by default.
  std::vector<MultiHotField> multi_hot;

  int64_t size() const {
    return static_cast<int64_t>(labels.empty() ? targets.size() : labels.size());
  }
  bool regression() const { return !targets.empty(); }
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
