// Batcher: turns a Dataset into float batches for one worker, epoch by epoch.
//
//  - Shuffling: each epoch uses a permutation of all examples drawn from (seed, epoch), the same
//    in every worker. Sharding: worker `rank` of `num_workers` takes positions rank,
//    rank + num_workers, ... of it, so the workers together see every example exactly once per
//    epoch (less the partial last batch when drop_remainder).
//  - Normalization: x = (v - mean[c]) / stddev[c], v being pixel / 255 or the float value, and
//    c the channel of an image [c, h, w], or the feature of a vector [features] (a tabular
//    set's features differ in scale; one mean for all of them would leave them so).
//  - Categorical ids (Dataset::fields per example) and multi-hot fields (Dataset::multi_hot)
//    travel with their example, as they are.
//  - Cropping: crop_h x crop_w windows; random offsets and horizontal flips (the TensorFlow
//    CIFAR-10 tutorial's training distortions) when random_crop_flip, else the center crop. The
//    random choices are drawn from (seed, epoch, example), so they do not depend on sharding.
//
// Contract: the Dataset is borrowed and must outlive the Batcher. Create() returns
// kInvalidArgument naming the bad option. Not thread-safe.
#ifndef TOWERPS_WORKER_DATA_BATCHER_H_
#define TOWERPS_WORKER_DATA_BATCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "towerps/dataset.h"
#include "towerps/result.h"

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

class Batcher {
 public:
  static Result<std::unique_ptr<Batcher>> Create(const Dataset* data, BatcherOptions options);

  // Per-example shape of the batches (after cropping).
  const Shape& example_shape() const { return out_shape_; }
  // Examples this worker sees per epoch, and full or partial batches that gives.
  int64_t shard_size() const;
  int64_t batches_per_epoch() const;

  // Starts epoch `epoch` (0-based) from its beginning.
  void StartEpoch(int64_t epoch);
  // Fills `batch` with the next batch of the epoch; false when the epoch is over.
  bool Next(Batch* batch);
  // Goes to the index-th batch (0-based) of the stream epoch 0, epoch 1, ...: the batches are
  // a function of (seed, epoch, rank), so a restarted worker reads what its predecessor read.
  void Seek(int64_t index);
  int64_t epoch() const { return epoch_; }
  const BatcherOptions& options() const { return options_; }

 private:
  Batcher(const Dataset* data, BatcherOptions options, Shape out_shape);
  void Fill(int64_t example, int64_t slot, Batch* batch) const;
  // The example's normalized (and cropped) values into `dst`.
  void FillValues(int64_t example, float* dst) const;

  const Dataset* data_;
  BatcherOptions options_;
  Shape out_shape_;
  // Per channel: x = v * scale + shift, from the options' statistics.
  std::vector<float> scale_, shift_;
  int64_t epoch_ = 0;
  std::vector<int64_t> order_;  // this worker's examples for the epoch
  size_t cursor_ = 0;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_BATCHER_H_
