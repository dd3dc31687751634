#include "worker/data/categorical.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/splitmix.h"
#include "common/zipf.h"

namespace towerps::worker {
namespace {

// Uniform in [-1, 1) from a hash of (key, a, b): the hidden scores, the same on every machine.
float Hidden(uint64_t key, uint64_t a, uint64_t b) {
  const uint64_t h = SplitMix64Finalize(key ^ SplitMix64Finalize(a * 0x9E3779B97F4A7C15ull + b));
  return static_cast<float>(h >> 40) * 0x1p-23f - 1.0f;
}

}  // namespace

Result<Dataset> MakeCategoricalDataset(const CategoricalOptions& o) {
  if (o.size < 1 || o.fields < 1 || o.vocabulary < 1 || o.dense < 1 || o.num_classes < 1 ||
      !(o.zipf_exponent > 0) || o.multi_hot < 0 || o.max_bag < 0 || !(o.drift >= 0) ||
      o.drift > 1000) {
    return InvalidArgumentError(
        "categorical data needs a positive size (" + std::to_string(o.size) + "), fields (" +
        std::to_string(o.fields) + "), vocabulary (" + std::to_string(o.vocabulary) +
        "), dense features (" + std::to_string(o.dense) + "), classes (" +
        std::to_string(o.num_classes) + ") and Zipf exponent, and no negative multi-hot fields (" +
        std::to_string(o.multi_hot) + ") or bag size (" + std::to_string(o.max_bag) +
        "), and a drift in [0, 1000] (" + std::to_string(o.drift) + ")");
  }
  Dataset d;
  d.example_shape = {o.dense};
  d.num_classes = o.num_classes;
  d.fields = o.fields;
  d.values.resize(static_cast<size_t>(o.size * o.dense));
  d.ids.resize(static_cast<size_t>(o.size * o.fields));
  d.labels.resize(static_cast<size_t>(o.size));
  d.multi_hot.assign(static_cast<size_t>(o.multi_hot), MultiHotField{.offsets = {0}, .ids = {}});
  std::mt19937_64 rng(SplitMix64Finalize(o.seed ^ 0xca7e90ull));
  ZipfSampler zipf(o.vocabulary, o.zipf_exponent);
  std::normal_distribution<float> normal;
  const uint64_t key = SplitMix64Finalize(o.scores_seed ^ 0x5c0e5ull);
  std::vector<float> score(static_cast<size_t>(o.num_classes));
  const double stream = static_cast<double>(o.stream_size > 0 ? o.stream_size : o.size);
  for (int64_t e = 0; e < o.size; ++e) {
    std::fill(score.begin(), score.end(), 0.0f);
    // Drift: the ranks' rotation at this example's place in the stream.
    const auto shift = static_cast<int64_t>(o.drift * static_cast<double>(o.vocabulary) *
                                            static_cast<double>(o.stream_offset + e) / stream);
    auto draw = [&](int64_t field) {
      return static_cast<uint64_t>(field * o.vocabulary +
                                   (zipf.Sample(rng) - 1 + shift) % o.vocabulary);
    };
    for (int f = 0; f < o.fields; ++f) {
      const uint64_t id = draw(f);
      d.ids[static_cast<size_t>(e * o.fields + f)] = id;
      for (int c = 0; c < o.num_classes; ++c) score[c] += Hidden(key, id, c);
    }
    for (int m = 0; m < o.multi_hot; ++m) {
      MultiHotField& field = d.multi_hot[static_cast<size_t>(m)];
      const auto n = static_cast<int>(rng() % static_cast<uint64_t>(o.max_bag + 1));
      for (int i = 0; i < n; ++i) {
        const uint64_t id = draw(o.fields + m);
        field.ids.push_back(id);
        for (int c = 0; c < o.num_classes; ++c) score[c] += 2.0f * Hidden(key, id, c) / n;
      }
      field.offsets.push_back(field.ids.size());
    }
    for (int j = 0; j < o.dense; ++j) {
      const float x = normal(rng);
      d.values[static_cast<size_t>(e * o.dense + j)] = x;
      for (int c = 0; c < o.num_classes; ++c) {
        score[c] += 0.5f * x * Hidden(key ^ 0xde45eull, static_cast<uint64_t>(j), c);
      }
    }
    d.labels[static_cast<size_t>(e)] =
        static_cast<int32_t>(std::max_element(score.begin(), score.end()) - score.begin());
  }
  return d;
}

}  // namespace towerps::worker
