#include "stripes.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

namespace {

constexpr int kSide = 28;
constexpr int kClasses = 4;

towerps::Dataset MakeStripes(const std::string& name, int count, uint64_t seed) {
  towerps::Dataset d;
  d.name = name;
  d.example_shape = {1, kSide, kSide};
  d.num_classes = kClasses;
  d.pixels.resize(static_cast<size_t>(count) * kSide * kSide);
  d.labels.resize(static_cast<size_t>(count));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> period(4.0, 9.0), phase(0.0, 2 * std::numbers::pi);
  std::normal_distribution<double> noise(0.0, 0.15);
  for (int i = 0; i < count; ++i) {
    const int label = static_cast<int>(rng() % kClasses);
    const double angle = label * std::numbers::pi / 4, p = period(rng), ph = phase(rng);
    const double dx = std::cos(angle), dy = std::sin(angle);
    uint8_t* image = d.pixels.data() + static_cast<size_t>(i) * kSide * kSide;
    for (int y = 0; y < kSide; ++y) {
      for (int x = 0; x < kSide; ++x) {
        const double v =
            0.5 + 0.35 * std::sin(2 * std::numbers::pi * (x * dx + y * dy) / p + ph) + noise(rng);
        image[y * kSide + x] = static_cast<uint8_t>(std::clamp(v, 0.0, 1.0) * 255.0 + 0.5);
      }
    }
    d.labels[static_cast<size_t>(i)] = label;
  }
  return d;
}

}  // namespace

towerps::Result<towerps::DataSplits> LoadStripes(const towerps::DataRequest& request) {
  towerps::DataSplits splits;
  splits.train = MakeStripes("stripes/train", 8000, request.seed);
  splits.test = MakeStripes("stripes/test", 2000, request.seed + 1);
  // No mean or stddev given: TowerPS normalizes with the training set's statistics.
  return splits;
}

towerps::Result<towerps::DatasetInfo> ProbeStripes(const towerps::DataRequest&) {
  return towerps::DatasetInfo{.example_shape = {1, kSide, kSide}, .num_classes = kClasses};
}
