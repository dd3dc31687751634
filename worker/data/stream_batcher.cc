#include "worker/data/stream_batcher.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "common/logging.h"
#include "common/splitmix.h"

namespace towerps::worker {
namespace {

// Examples read from the stream at a time.
constexpr int64_t kChunk = 4096;

uint64_t Mix(uint64_t a, uint64_t b) {
  return SplitMix64Finalize(a ^ (b + kSplitMix64Gamma + (a << 6) + (a >> 2)));
}

// Example `i` of `d`'s dense features, as floats (bytes scaled by 1/255).
float Value(const Dataset& d, int64_t i, int64_t j) {
  const int64_t at = i * d.example_size() + j;
  return d.is_float() ? d.values[static_cast<size_t>(at)]
                      : static_cast<float>(d.pixels[static_cast<size_t>(at)]) / 255.0f;
}

}  // namespace

StreamBatcher::StreamBatcher(StreamOpener open, BatcherOptions options, int64_t buffer,
                             std::string name)
    : open_(std::move(open)),
      options_(std::move(options)),
      buffer_(options_.shuffle ? buffer : 1),
      name_(std::move(name)) {}

Result<std::unique_ptr<StreamBatcher>> StreamBatcher::Create(StreamOpener open, BatcherOptions o,
                                                             int64_t buffer, std::string name) {
  if (o.batch_size < 1) {
    return InvalidArgumentError("batch_size " + std::to_string(o.batch_size) + " must be >= 1");
  }
  if (o.num_workers < 1 || o.rank < 0 || o.rank >= o.num_workers) {
    return InvalidArgumentError("worker rank " + std::to_string(o.rank) + " is not in 0.." +
                                std::to_string(o.num_workers - 1));
  }
  if (buffer < 1) {
    return InvalidArgumentError("--shuffle-buffer " + std::to_string(buffer) +
                                " must be at least 1 example");
  }
  if (o.crop_h != 0 || o.crop_w != 0 || o.random_crop_flip) {
    return InvalidArgumentError(name +
                                ": a streamed dataset's examples are feature vectors; "
                                "crops do not apply");
  }
  std::unique_ptr<StreamBatcher> b(
      new StreamBatcher(std::move(open), std::move(o), buffer, std::move(name)));
  TOWERPS_RETURN_IF_ERROR(b->Count());
  b->StartEpoch(0);
  return b;
}

// One pass: the examples' count and layout, each chunk validated, and the per-feature
// statistics when the options bring none.
Status StreamBatcher::Count() {
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<ExampleStream> stream, open_());
  std::vector<double> sum, sq;
  const bool statistics = options_.mean.empty() || options_.stddev.empty();
  for (;;) {
    Dataset chunk;
    TOWERPS_ASSIGN_OR_RETURN(const int64_t n, stream->Read(kChunk, &chunk));
    if (n == 0) break;
    chunk.name = name_;
    if (chunk.num_classes < 1) chunk.num_classes = 1 << 24;  // labels checked by the model
    TOWERPS_RETURN_IF_ERROR(
        chunk.Validate().WithContext("examples " + std::to_string(examples_) + " and on"));
    if (examples_ == 0) {
      if (chunk.example_shape.size() != 1) {
        return InvalidArgumentError(name_ + ": examples are " + ShapeToString(chunk.example_shape) +
                                    "; a streamed dataset's must be feature vectors [F]");
      }
      shape_ = chunk.example_shape;
      fields_ = chunk.fields;
      multi_hot_ = static_cast<int>(chunk.multi_hot.size());
      regression_ = chunk.regression();
      sum.assign(static_cast<size_t>(shape_[0]), 0.0);
      sq.assign(sum.size(), 0.0);
    } else if (chunk.example_shape != shape_ || chunk.fields != fields_ ||
               static_cast<int>(chunk.multi_hot.size()) != multi_hot_ ||
               chunk.regression() != regression_) {
      return InvalidArgumentError(name_ + ": example " + std::to_string(examples_) +
                                  " is laid out unlike the first (shape, ids, multi-hot "
                                  "fields or targets)");
    }
    for (int32_t label : chunk.labels) {
      num_classes_ = std::max(num_classes_, label + 1);
      if (label_counts_.size() <= static_cast<size_t>(label)) label_counts_.resize(label + 1, 0);
      ++label_counts_[static_cast<size_t>(label)];
    }
    if (statistics) {
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < shape_[0]; ++j) {
          const double v = Value(chunk, i, j);
          sum[static_cast<size_t>(j)] += v;
          sq[static_cast<size_t>(j)] += v * v;
        }
      }
    }
    examples_ += n;
  }
  if (examples_ == 0) return InvalidArgumentError(name_ + " holds no examples");
  if (const std::string notes = stream->Notes(); !notes.empty()) TOWERPS_LOG(kWarning) << notes;
  if (statistics) {
    options_.mean.assign(sum.size(), 0.0f);
    options_.stddev.assign(sum.size(), 1.0f);
    for (size_t j = 0; j < sum.size(); ++j) {
      const double m = sum[j] / static_cast<double>(examples_);
      const double var = std::max(0.0, sq[j] / static_cast<double>(examples_) - m * m);
      options_.mean[j] = static_cast<float>(m);
      options_.stddev[j] = var > 1e-12 ? static_cast<float>(std::sqrt(var)) : 1.0f;
    }
  }
  // Value() has scaled bytes already.
  return NormalizationScales(options_, shape_, 1.0f, name_, &scale_, &shift_);
}

void StreamBatcher::StartEpoch(int64_t epoch) {
  epoch_ = epoch;
  pool_.clear();
  chunk_ = Dataset();
  chunk_next_ = position_ = emitted_ = 0;
  stream_done_ = false;
  state_ = Mix(Mix(options_.seed ^ 0x57ea3ull, static_cast<uint64_t>(epoch)),
               static_cast<uint64_t>(options_.rank));
  Result<std::unique_ptr<ExampleStream>> s = open_();
  if (!s.ok()) {
    status_ = s.status();
    return;
  }
  stream_ = std::move(*s);
}

Result<bool> StreamBatcher::ReadOne(Example* out) {
  for (;;) {
    if (chunk_next_ == chunk_.size()) {
      if (stream_done_) return false;
      chunk_ = Dataset();
      chunk_next_ = 0;
      TOWERPS_ASSIGN_OR_RETURN(const int64_t n, stream_->Read(kChunk, &chunk_));
      if (n == 0) {
        stream_done_ = true;
        return false;
      }
      continue;
    }
    const int64_t i = chunk_next_++;
    const int64_t at = position_++;
    if (at % options_.num_workers != options_.rank) continue;
    const int64_t f = shape_[0];
    out->x.resize(static_cast<size_t>(f));
    for (int64_t j = 0; j < f; ++j) {
      out->x[static_cast<size_t>(j)] =
          Value(chunk_, i, j) * scale_[static_cast<size_t>(j)] + shift_[static_cast<size_t>(j)];
    }
    if (regression_) {
      out->target = chunk_.targets[static_cast<size_t>(i)];
    } else {
      out->label = chunk_.labels[static_cast<size_t>(i)];
    }
    const auto fields = static_cast<size_t>(chunk_.fields);
    out->ids.assign(
        chunk_.ids.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(i) * fields),
        chunk_.ids.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(i + 1) * fields));
    out->bags.resize(chunk_.multi_hot.size());
    for (size_t m = 0; m < chunk_.multi_hot.size(); ++m) {
      const MultiHotField& field = chunk_.multi_hot[m];
      const auto e = static_cast<size_t>(i);
      out->bags[m].assign(field.ids.begin() + static_cast<ptrdiff_t>(field.offsets[e]),
                          field.ids.begin() + static_cast<ptrdiff_t>(field.offsets[e + 1]));
    }
    return true;
  }
}

Status StreamBatcher::Fill() {
  while (static_cast<int64_t>(pool_.size()) < buffer_) {
    Example e;
    TOWERPS_ASSIGN_OR_RETURN(const bool read, ReadOne(&e));
    if (!read) break;
    pool_.push_back(std::move(e));
  }
  peak_ = std::max(peak_, static_cast<int64_t>(pool_.size()));
  return Status::Ok();
}

uint64_t StreamBatcher::Draw() {
  state_ = Mix(state_, static_cast<uint64_t>(emitted_));
  return state_;
}

bool StreamBatcher::Next(Batch* batch) {
  if (!status_.ok() || stream_ == nullptr) return false;
  const int64_t left = shard_size() - emitted_;
  const int64_t want = options_.batch_size;
  if (left <= 0 || (left < want && options_.drop_remainder)) return false;
  const int64_t n = std::min(left, want);
  const int64_t f = shape_[0];
  batch->size = static_cast<int>(n);
  batch->x.resize(static_cast<size_t>(n * f));
  batch->labels.resize(regression_ ? 0 : static_cast<size_t>(n));
  batch->targets.resize(regression_ ? static_cast<size_t>(n) : 0);
  batch->ids.resize(static_cast<size_t>(n * fields_));
  batch->bags.resize(static_cast<size_t>(multi_hot_));
  for (Batch::Bag& bag : batch->bags) {
    bag.offsets.assign(1, 0);
    bag.ids.clear();
  }
  for (int64_t k = 0; k < n; ++k) {
    if (Status s = Fill(); !s.ok()) {
      status_ = s;
      return false;
    }
    if (pool_.empty()) {  // the split ended early: it changed since it was counted
      status_ =
          IoError(name_ + " ended after " + std::to_string(position_) + " examples in epoch " +
                  std::to_string(epoch_) + ", but held " + std::to_string(examples_) +
                  " when the job started; it must not change while the job runs");
      return false;
    }
    const size_t j = options_.shuffle ? static_cast<size_t>(Draw() % pool_.size()) : 0;
    Example& e = pool_[j];
    std::copy(e.x.begin(), e.x.end(), batch->x.begin() + k * f);
    if (regression_) {
      batch->targets[static_cast<size_t>(k)] = e.target;
    } else {
      batch->labels[static_cast<size_t>(k)] = e.label;
    }
    std::copy(e.ids.begin(), e.ids.end(), batch->ids.begin() + k * fields_);
    for (size_t m = 0; m < e.bags.size(); ++m) {
      Batch::Bag& bag = batch->bags[m];
      bag.ids.insert(bag.ids.end(), e.bags[m].begin(), e.bags[m].end());
      bag.offsets.push_back(static_cast<uint32_t>(bag.ids.size()));
    }
    // The drawn slot takes the last one's example; the next Fill tops the buffer up.
    if (j + 1 != pool_.size()) std::swap(pool_[j], pool_.back());
    pool_.pop_back();
    ++emitted_;
  }
  return true;
}

void StreamBatcher::Seek(int64_t index) {
  const int64_t per_epoch = std::max<int64_t>(1, batches_per_epoch());
  StartEpoch(index / per_epoch);
  Batch skipped;
  for (int64_t k = 0; k < index % per_epoch && Next(&skipped); ++k) {
  }
}

}  // namespace towerps::worker
