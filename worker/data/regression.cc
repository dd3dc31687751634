#include "worker/data/regression.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/splitmix.h"

namespace towerps::worker {

Result<Dataset> MakeRegressionDataset(const RegressionOptions& o) {
  if (o.size < 1 || o.features < 1 || !(o.noise >= 0)) {
    return InvalidArgumentError("regression data needs a positive size (" + std::to_string(o.size) +
                                ") and feature count (" + std::to_string(o.features) +
                                ") and a noise of at least 0 (" + std::to_string(o.noise) + ")");
  }
  // The hidden weights: standard normal, scaled to unit total variance.
  std::mt19937_64 weights_rng(SplitMix64Finalize(o.weights_seed ^ 0x7e9e55ull));
  std::normal_distribution<double> normal;
  std::vector<double> w(static_cast<size_t>(o.features));
  double norm = 0;
  for (double& v : w) {
    v = normal(weights_rng);
    norm += v * v;
  }
  for (double& v : w) v /= std::sqrt(norm);
  const double bias = normal(weights_rng);
  Dataset d;
  d.example_shape = {o.features};
  d.num_classes = 1;  // not used: the dataset has targets
  d.values.resize(static_cast<size_t>(o.size * o.features));
  d.targets.resize(static_cast<size_t>(o.size));
  std::mt19937_64 rng(SplitMix64Finalize(o.seed ^ 0x2e62e55ull));
  std::normal_distribution<float> feature;
  for (int64_t e = 0; e < o.size; ++e) {
    double y = bias;
    for (int j = 0; j < o.features; ++j) {
      const float x = feature(rng);
      d.values[static_cast<size_t>(e * o.features + j)] = x;
      y += w[static_cast<size_t>(j)] * x;
    }
    d.targets[static_cast<size_t>(e)] = static_cast<float>(y + o.noise * normal(rng));
  }
  return d;
}

}  // namespace towerps::worker
