// SplitMix64: the small, fast, seedable mixer behind TowerPS's reproducible randomness (weight
// initialization, synthetic data, batch shuffles). kernels/dropout_hash.h keeps its own copy of
// the finalizer because it must also compile as device code.
//
// Contract: pure functions, thread-safe; the same inputs give the same bits on every machine.
#ifndef TOWERPS_COMMON_SPLITMIX_H_
#define TOWERPS_COMMON_SPLITMIX_H_

#include <cstdint>

namespace towerps {

inline constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// The SplitMix64 output function: a bijective scramble of z.
inline constexpr uint64_t SplitMix64Finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The next number of the stream whose state is `state` (advanced).
inline uint64_t SplitMix64Next(uint64_t& state) {
  return SplitMix64Finalize(state += kSplitMix64Gamma);
}

}  // namespace towerps

#endif  // TOWERPS_COMMON_SPLITMIX_H_
