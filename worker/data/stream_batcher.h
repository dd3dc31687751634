// StreamBatcher: batches of a split read from an ExampleStream (<towerps/example_stream.h>)
// through a shuffle buffer, for data larger than memory (--shuffle-buffer N).
//
//  - Sharding: worker `rank` of `num_workers` keeps the examples at positions rank,
//    rank + num_workers, ... of the split, so the workers together see every example exactly
//    once per epoch (less the partial last batch when drop_remainder).
//  - Order: each epoch reads the split from its beginning. The buffer holds up to N of this
//    worker's examples; each draw takes a seeded random one and puts the next example read in
//    its place. The draws come from (seed, epoch, rank), so a restarted worker that Seeks to a
//    batch reads what its predecessor read. Without shuffle the examples come in split order.
//    (A buffer of N mixes examples up to about N apart, not the whole split: shuffle the file
//    once beforehand if it is sorted, by time or by label.)
//  - Memory: the buffer and one chunk of read examples, never the split.
//  - Examples are feature vectors [F] (float values, or bytes scaled by 1/255) normalized as
//    the Batcher does, per feature; their labels or targets, ids and multi-hot fields travel
//    with them.
//
// Contract: Create reads the split through once, to count its examples and check them (an
// error names the file and the line; what the stream skipped is logged once, from its Notes),
// and, when the options give no normalization, to compute it per feature. A read that fails later
// (the file changed or broke) stops Next, and status() names it. Not thread-safe.
#ifndef TOWERPS_WORKER_DATA_STREAM_BATCHER_H_
#define TOWERPS_WORKER_DATA_STREAM_BATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "towerps/example_stream.h"
#include "towerps/result.h"
#include "worker/data/batch_source.h"

namespace towerps::worker {

// Opens the split from its beginning.
using StreamOpener = std::function<Result<std::unique_ptr<ExampleStream>>()>;

class StreamBatcher : public BatchSource {
 public:
  // options.mean and stddev empty: computed per feature in the counting pass. `buffer` >= 1.
  // Crops are refused (vectors only). kInvalidArgument names the bad option or input.
  static Result<std::unique_ptr<StreamBatcher>> Create(StreamOpener open, BatcherOptions options,
                                                       int64_t buffer, std::string name);

  const Shape& example_shape() const override { return shape_; }
  int64_t examples() const override { return examples_; }
  void StartEpoch(int64_t epoch) override;
  bool Next(Batch* batch) override;
  void Seek(int64_t index) override;
  int64_t epoch() const override { return epoch_; }
  const BatcherOptions& options() const override { return options_; }
  Status status() const override { return status_; }

  // What the counting pass found: categorical ids per example, multi-hot fields, targets
  // instead of labels, the largest label + 1.
  int fields() const { return fields_; }
  int multi_hot() const { return multi_hot_; }
  bool regression() const { return regression_; }
  int num_classes() const { return num_classes_; }
  // Examples per label, from the counting pass.
  const std::vector<int64_t>& label_counts() const { return label_counts_; }
  const std::string& name() const { return name_; }
  // The most examples the buffer has held: at most `buffer`.
  int64_t peak_buffered() const { return peak_; }

 private:
  struct Example {
    std::vector<float> x;  // normalized
    int32_t label = 0;
    float target = 0;
    std::vector<uint64_t> ids;
    std::vector<std::vector<uint64_t>> bags;
  };
  StreamBatcher(StreamOpener open, BatcherOptions options, int64_t buffer, std::string name);
  Status Count();
  // Reads until the buffer holds `buffer_` examples or the split is over.
  Status Fill();
  // The next of this worker's examples read, if any.
  Result<bool> ReadOne(Example* out);
  uint64_t Draw();

  StreamOpener open_;
  BatcherOptions options_;
  int64_t buffer_;
  std::string name_;
  Shape shape_;
  int64_t examples_ = 0;
  int fields_ = 0, multi_hot_ = 0, num_classes_ = 0;
  std::vector<int64_t> label_counts_;
  bool regression_ = false;
  std::vector<float> scale_, shift_;  // per feature: x = v * scale + shift

  int64_t epoch_ = 0;
  std::unique_ptr<ExampleStream> stream_;
  Dataset chunk_;           // examples read, not yet taken
  int64_t chunk_next_ = 0;  // the next of them to take
  int64_t position_ = 0;    // in the split, of chunk_'s next example
  bool stream_done_ = false;
  std::vector<Example> pool_;  // the shuffle buffer
  int64_t emitted_ = 0;        // this epoch
  uint64_t state_ = 0;         // the epoch's draws
  int64_t peak_ = 0;
  Status status_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_STREAM_BATCHER_H_
