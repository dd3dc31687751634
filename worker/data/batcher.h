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
#include "worker/data/batch_source.h"

namespace towerps::worker {

class Batcher : public BatchSource {
 public:
  static Result<std::unique_ptr<Batcher>> Create(const Dataset* data, BatcherOptions options);

  // Per-example shape of the batches (after cropping).
  const Shape& example_shape() const override { return out_shape_; }
  int64_t examples() const override { return data_->size(); }

  // Starts epoch `epoch` (0-based) from its beginning.
  void StartEpoch(int64_t epoch) override;
  // Fills `batch` with the next batch of the epoch; false when the epoch is over.
  bool Next(Batch* batch) override;
  // Goes to the index-th batch (0-based) of the stream epoch 0, epoch 1, ...: the batches are
  // a function of (seed, epoch, rank), so a restarted worker reads what its predecessor read.
  void Seek(int64_t index) override;
  int64_t epoch() const override { return epoch_; }
  const BatcherOptions& options() const override { return options_; }

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
