#include "worker/data/synthetic.h"

#include <algorithm>

#include "common/splitmix.h"

namespace towerps::worker {

Result<Dataset> MakeSyntheticDataset(const SyntheticOptions& o) {
  auto elems = CheckedNumElements(o.example_shape);
  if (o.size < 1 || o.example_shape.size() != 3 || !elems.ok() || *elems < 1 || o.num_classes < 1 ||
      o.num_classes > 256) {
    return InvalidArgumentError("synthetic dataset: size " + std::to_string(o.size) + ", shape " +
                                ShapeToString(o.example_shape) + " and classes " +
                                std::to_string(o.num_classes) +
                                " must be positive, [c, h, w] and at most 256 classes");
  }
  Dataset d;
  d.name = "synthetic";
  d.example_shape = o.example_shape;
  d.num_classes = o.num_classes;
  const int64_t n = *elems;
  // One random pattern per class; examples are the pattern plus noise.
  uint64_t state = o.seed;
  std::vector<uint8_t> patterns(static_cast<size_t>(n * o.num_classes));
  for (uint8_t& p : patterns) p = static_cast<uint8_t>(SplitMix64Next(state) >> 56);
  d.labels.resize(static_cast<size_t>(o.size));
  d.pixels.resize(static_cast<size_t>(o.size * n));
  for (int64_t i = 0; i < o.size; ++i) {
    const int label =
        static_cast<int>(SplitMix64Next(state) % static_cast<uint64_t>(o.num_classes));
    d.labels[i] = static_cast<uint8_t>(label);
    const uint8_t* pattern = patterns.data() + label * n;
    uint8_t* out = d.pixels.data() + i * n;
    for (int64_t j = 0; j < n; ++j) {
      const int noise = static_cast<int>(SplitMix64Next(state) >> 58) - 32;  // [-32, 32)
      out[j] = static_cast<uint8_t>(std::clamp(pattern[j] / 2 + 64 + noise, 0, 255));
    }
  }
  return d;
}

}  // namespace towerps::worker
