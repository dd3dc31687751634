#include "worker/layers/initializer.h"

#include <cmath>
#include <numbers>

#include "common/splitmix.h"

namespace towerps::worker {
namespace {

double Uniform01(uint64_t& state) {  // (0, 1)
  return (static_cast<double>(SplitMix64Next(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

uint64_t HashName(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

template <typename T>
void InitializeValues(Init init, int64_t fan_in, int64_t fan_out, uint64_t seed,
                      const std::string& name, std::vector<T>& out) {
  uint64_t state = HashName(seed, name);
  switch (init) {
    case Init::kZeros:
      for (T& v : out) v = T(0);
      break;
    case Init::kHe: {
      const double stddev = std::sqrt(2.0 / static_cast<double>(fan_in));
      for (T& v : out) {  // Box-Muller
        const double u1 = Uniform01(state), u2 = Uniform01(state);
        v = static_cast<T>(stddev * std::sqrt(-2.0 * std::log(u1)) *
                           std::cos(2.0 * std::numbers::pi * u2));
      }
      break;
    }
    case Init::kGlorot: {
      const double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
      for (T& v : out) v = static_cast<T>((2.0 * Uniform01(state) - 1.0) * limit);
      break;
    }
  }
}

template void InitializeValues<float>(Init, int64_t, int64_t, uint64_t, const std::string&,
                                      std::vector<float>&);
template void InitializeValues<double>(Init, int64_t, int64_t, uint64_t, const std::string&,
                                       std::vector<double>&);

}  // namespace towerps::worker
