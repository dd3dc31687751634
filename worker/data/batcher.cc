#include "worker/data/batcher.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "common/splitmix.h"

namespace towerps::worker {
namespace {

uint64_t Mix(uint64_t a, uint64_t b) {
  return SplitMix64Finalize(a ^ (b + kSplitMix64Gamma + (a << 6) + (a >> 2)));
}

}  // namespace

Result<std::unique_ptr<Batcher>> Batcher::Create(const Dataset* data, BatcherOptions o) {
  TOWERPS_CHECK(data != nullptr);
  if (o.batch_size < 1) {
    return InvalidArgumentError("batch_size " + std::to_string(o.batch_size) + " must be >= 1");
  }
  if (o.num_workers < 1 || o.rank < 0 || o.rank >= o.num_workers) {
    return InvalidArgumentError("worker rank " + std::to_string(o.rank) + " is not in 0.." +
                                std::to_string(o.num_workers - 1));
  }
  TOWERPS_RETURN_IF_ERROR(data->Validate());
  if (data->example_shape.size() != 3 && data->example_shape.size() != 1) {
    return InvalidArgumentError(data->name + ": example shape " +
                                ShapeToString(data->example_shape) +
                                " is neither [c, h, w] nor [features]");
  }
  const Shape& in = data->example_shape;
  const int64_t c = NormalizationChannels(in);
  const int64_t h = in.size() == 3 ? in[1] : 1, w = in.size() == 3 ? in[2] : in[0];
  std::vector<float> scale, shift;
  TOWERPS_RETURN_IF_ERROR(
      NormalizationScales(o, in, data->is_float() ? 1.0f : 255.0f, data->name, &scale, &shift));
  Shape out = data->example_shape;
  if (o.crop_h != 0 || o.crop_w != 0) {
    if (in.size() != 3 || o.crop_h < 1 || o.crop_w < 1 || o.crop_h > h || o.crop_w > w) {
      return InvalidArgumentError("crop " + std::to_string(o.crop_h) + "x" +
                                  std::to_string(o.crop_w) + " does not fit images " +
                                  ShapeToString(data->example_shape));
    }
    out = {c, o.crop_h, o.crop_w};
  } else if (o.random_crop_flip) {
    o.crop_h = static_cast<int>(h);  // flips only
    o.crop_w = static_cast<int>(w);
  }
  std::unique_ptr<Batcher> b(new Batcher(data, std::move(o), std::move(out)));
  b->scale_ = std::move(scale);
  b->shift_ = std::move(shift);
  b->StartEpoch(0);
  return b;
}

Batcher::Batcher(const Dataset* data, BatcherOptions options, Shape out_shape)
    : data_(data), options_(std::move(options)), out_shape_(std::move(out_shape)) {}

void Batcher::StartEpoch(int64_t epoch) {
  epoch_ = epoch;
  cursor_ = 0;
  std::vector<int64_t> all(static_cast<size_t>(data_->size()));
  std::iota(all.begin(), all.end(), 0);
  if (options_.shuffle) {
    // Fisher-Yates with our own generator: std::shuffle's algorithm is not specified.
    uint64_t state = Mix(options_.seed, static_cast<uint64_t>(epoch));
    for (size_t i = all.size(); i > 1; --i) {
      state = Mix(state, i);
      std::swap(all[i - 1], all[state % i]);
    }
  }
  order_.clear();
  for (size_t i = static_cast<size_t>(options_.rank); i < all.size();
       i += static_cast<size_t>(options_.num_workers)) {
    order_.push_back(all[i]);
  }
}

void Batcher::Seek(int64_t index) {
  const int64_t per_epoch = std::max<int64_t>(1, batches_per_epoch());
  StartEpoch(index / per_epoch);
  cursor_ = std::min(order_.size(), static_cast<size_t>(index % per_epoch) *
                                        static_cast<size_t>(options_.batch_size));
}

bool Batcher::Next(Batch* batch) {
  const size_t left = order_.size() - cursor_;
  const size_t want = static_cast<size_t>(options_.batch_size);
  if (left == 0 || (left < want && options_.drop_remainder)) return false;
  const size_t n = std::min(left, want);
  batch->size = static_cast<int>(n);
  batch->x.resize(n * static_cast<size_t>(NumElements(out_shape_)));
  batch->labels.resize(data_->regression() ? 0 : n);
  batch->targets.resize(data_->regression() ? n : 0);
  batch->ids.resize(n * static_cast<size_t>(data_->fields));
  batch->bags.resize(data_->multi_hot.size());
  for (Batch::Bag& bag : batch->bags) {
    bag.offsets.assign(1, 0);
    bag.ids.clear();
  }
  const int64_t bytes = data_->example_size() * (data_->is_float() ? 4 : 1);
  const char* base = data_->is_float() ? reinterpret_cast<const char*>(data_->values.data())
                                       : reinterpret_cast<const char*>(data_->pixels.data());
  for (size_t i = 0; i < n; ++i) {
    // Examples sit at random places in a large array: fetch the next one while converting this.
    if (i + 1 < n) {
      const char* next = base + order_[cursor_ + i + 1] * bytes;
      for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(next + off);
    }
    Fill(order_[cursor_ + i], static_cast<int64_t>(i), batch);
  }
  cursor_ += n;
  return true;
}

namespace {

// Writes channel `ch` of one example, rows y0.. and columns x0.. of a w-wide source, as
// v * scale + shift (one multiply-add, so that the loop vectorizes), mirrored when `flip`.
template <typename V>
void ConvertChannel(const V* src, int64_t w, int64_t y0, int64_t x0, int64_t oh, int64_t ow,
                    bool flip, float scale, float shift, float* dst) {
  for (int64_t y = 0; y < oh; ++y) {
    const V* row = src + (y0 + y) * w + x0;
    float* out = dst + y * ow;
    if (flip) {
      for (int64_t x = 0; x < ow; ++x) out[x] = static_cast<float>(row[ow - 1 - x]) * scale + shift;
    } else {
      for (int64_t x = 0; x < ow; ++x) out[x] = static_cast<float>(row[x]) * scale + shift;
    }
  }
}

// A vector example: feature j as v[j] * scale[j] + shift[j].
template <typename V>
void ConvertFeatures(const V* src, int64_t n, const float* scale, const float* shift, float* dst) {
  for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<float>(src[j]) * scale[j] + shift[j];
}

}  // namespace

void Batcher::Fill(int64_t example, int64_t slot, Batch* batch) const {
  FillValues(example, batch->x.data() + slot * NumElements(out_shape_));
  if (data_->regression()) {
    batch->targets[static_cast<size_t>(slot)] = data_->targets[static_cast<size_t>(example)];
  } else {
    batch->labels[static_cast<size_t>(slot)] = data_->labels[static_cast<size_t>(example)];
  }
  const auto fields = static_cast<size_t>(data_->fields);
  std::copy_n(data_->ids.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(example) * fields),
              fields,
              batch->ids.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(slot) * fields));
  // Slots are filled in order: each example's multi-hot ids follow the previous one's.
  for (size_t m = 0; m < data_->multi_hot.size(); ++m) {
    const MultiHotField& field = data_->multi_hot[m];
    Batch::Bag& bag = batch->bags[m];
    const auto e = static_cast<size_t>(example);
    bag.ids.insert(bag.ids.end(), field.ids.begin() + static_cast<ptrdiff_t>(field.offsets[e]),
                   field.ids.begin() + static_cast<ptrdiff_t>(field.offsets[e + 1]));
    bag.offsets.push_back(static_cast<uint32_t>(bag.ids.size()));
  }
}

void Batcher::FillValues(int64_t example, float* dst) const {
  const Shape& in = data_->example_shape;
  const int64_t offset = example * data_->example_size();
  if (in.size() == 1) {
    if (data_->is_float()) {
      ConvertFeatures(data_->values.data() + offset, in[0], scale_.data(), shift_.data(), dst);
    } else {
      ConvertFeatures(data_->pixels.data() + offset, in[0], scale_.data(), shift_.data(), dst);
    }
    return;
  }
  const int64_t c = in[0], h = in[1], w = in[2];
  const int64_t oh = out_shape_[1], ow = out_shape_[2];
  int64_t y0 = (h - oh) / 2, x0 = (w - ow) / 2;
  bool flip = false;
  if (options_.random_crop_flip) {
    const uint64_t r = Mix(Mix(options_.seed ^ 0xC0FFEEull, static_cast<uint64_t>(epoch_)),
                           static_cast<uint64_t>(example));
    y0 = static_cast<int64_t>(r % static_cast<uint64_t>(h - oh + 1));
    x0 = static_cast<int64_t>((r >> 20) % static_cast<uint64_t>(w - ow + 1));
    flip = (r >> 40) & 1;
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    const float scale = scale_[static_cast<size_t>(ch)], shift = shift_[static_cast<size_t>(ch)];
    float* out = dst + ch * oh * ow;
    if (data_->is_float()) {
      ConvertChannel(data_->values.data() + offset + ch * h * w, w, y0, x0, oh, ow, flip, scale,
                     shift, out);
    } else {
      ConvertChannel(data_->pixels.data() + offset + ch * h * w, w, y0, x0, oh, ow, flip, scale,
                     shift, out);
    }
  }
}

}  // namespace towerps::worker
