// A batch of examples as a worker's model takes them, how a batch source makes them
// (BatcherOptions), and what an embedding table looks up in one.
//
// Contract: value types and pure functions; thread-compatible.
#ifndef TOWERPS_WORKER_DATA_BATCH_H_
#define TOWERPS_WORKER_DATA_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "towerps/shape.h"
#include "towerps/status.h"

namespace towerps::worker {

struct BatcherOptions {
  int batch_size = 64;
  uint64_t seed = 1;
  bool shuffle = true;
  int rank = 0;
  int num_workers = 1;
  bool drop_remainder = true;  // false for evaluation: the last batch may be smaller
  // One per channel (per feature of a vector: NormalizationChannels), or one for all.
  std::vector<float> mean = {0.0f};
  std::vector<float> stddev = {1.0f};  // idem; > 0
  int crop_h = 0, crop_w = 0;          // 0: no cropping
  bool random_crop_flip = false;
};

struct Batch {
  int size = 0;
  std::vector<float> x;         // size * NumElements(example_shape), NCHW
  std::vector<int32_t> labels;  // size; empty for a regression dataset, which fills
  std::vector<float> targets;   // size
  std::vector<uint64_t> ids;    // size * Dataset::fields: each example's categorical ids
  // Per multi-hot field: example b's ids are ids[offsets[b] .. offsets[b + 1]), size + 1
  // offsets from 0.
  struct Bag {
    std::vector<uint32_t> offsets;
    std::vector<uint64_t> ids;
  };
  std::vector<Bag> bags;
};

// Where one embedding table's ids are in a batch (Model::table_field_offset and table_bag): the
// one-hot fields [field_offset, field_offset + fields) of every example, or, when bag >= 0,
// multi-hot field `bag`.
struct TableInput {
  int field_offset = 0, fields = 1;
  int bag = -1;
};

// What that table looks up in `batch`: its one-hot ids example after example (`fields` per
// example), or the multi-hot field's ids as they are (Batch::Bag::offsets says whose).
std::vector<uint64_t> TableIds(const Batch& batch, const TableInput& input);
// A multi-hot field's batch + 1 offsets into TableIds (Model::SetTableRows's `bags`); nullptr
// for one-hot tables. Valid while `batch` is unchanged.
const uint32_t* BagOffsets(const Batch& batch, const TableInput& input);

// The channels normalization has statistics for: an image's [c, h, w] c, a vector's [features]
// each feature.
int64_t NormalizationChannels(const Shape& example_shape);

// Normalization as x = v * scale[c] + shift[c] per channel (per feature of a vector
// [features]), from the options' mean and stddev (one value for all, or one per channel), v being
// the value read divided by `unit` (255 for pixel bytes, else 1). kInvalidArgument naming `what`,
// the examples' shape and the option that fits neither, or a stddev that is not positive.
Status NormalizationScales(const BatcherOptions& options, const Shape& example_shape, float unit,
                           const std::string& what, std::vector<float>* scale,
                           std::vector<float>* shift);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_BATCH_H_
