// BatchSource: where a worker's batches come from, epoch by epoch. Batcher (batcher.h) batches a
// dataset held in memory; StreamBatcher (stream_batcher.h) one read from a stream through a
// shuffle buffer. Both give each worker its share of every epoch, in an order that is a function
// of (seed, epoch, rank) alone, so that a restarted worker reads what its predecessor read.
//
// Contract: not thread-safe. Next fills `batch` and returns true, or returns false at the end
// of the epoch, or when reading failed: status() then says why (always Ok for data in memory).
#ifndef TOWERPS_WORKER_DATA_BATCH_SOURCE_H_
#define TOWERPS_WORKER_DATA_BATCH_SOURCE_H_

#include <cstdint>

#include "towerps/shape.h"
#include "towerps/status.h"
#include "worker/data/batch.h"

namespace towerps::worker {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Per-example shape of the batches (after any crop).
  virtual const Shape& example_shape() const = 0;
  // The split's examples, every worker's.
  virtual int64_t examples() const = 0;
  // This worker's per epoch (positions rank, rank + workers, ...), and the full or partial
  // batches that gives.
  int64_t shard_size() const {
    const int64_t n = examples(), w = options().num_workers;
    return n / w + (options().rank < n % w ? 1 : 0);
  }
  int64_t batches_per_epoch() const {
    const int64_t s = shard_size(), b = options().batch_size;
    return options().drop_remainder ? s / b : (s + b - 1) / b;
  }
  // Starts epoch `epoch` (0-based) from its beginning.
  virtual void StartEpoch(int64_t epoch) = 0;
  virtual bool Next(Batch* batch) = 0;
  // Goes to the index-th batch (0-based) of the stream epoch 0, epoch 1, ...
  virtual void Seek(int64_t index) = 0;
  virtual int64_t epoch() const = 0;
  virtual const BatcherOptions& options() const = 0;
  virtual Status status() const { return Status::Ok(); }
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_BATCH_SOURCE_H_
