#include "common/finite.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace towerps {

// Built for AVX2 too, chosen at load time on CPUs that have it (the build itself assumes only
// x86-64's SSE2): twice the rate, about memcpy's, so the check costs as little as one copy.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TOWERPS_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#else
#define TOWERPS_AVX2_CLONE
#endif

TOWERPS_AVX2_CLONE int64_t FindNonFinite(const float* x, int64_t n) {
  // A float is NaN or infinite exactly when its exponent bits are all set; adding one to the
  // lowest exponent bit then carries into bit 31, and never does otherwise. OR-ing that over a
  // block is an integer reduction that vectorises with plain SSE2 (and, add, or); only a
  // block that holds such a value is searched element by element.
  constexpr int64_t kBlock = 4096;
  constexpr uint32_t kExponent = 0x7f800000u;
  constexpr uint32_t kLowestExponentBit = 0x00800000u;
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    uint32_t carries = 0;
    for (int64_t i = start; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, x + i, sizeof(bits));
      carries |= (bits & kExponent) + kLowestExponentBit;
    }
    if ((carries & 0x80000000u) == 0) continue;
    for (int64_t i = start; i < end; ++i) {
      if (!std::isfinite(x[i])) return i;
    }
  }
  return -1;
}

std::string DescribeValue(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

}  // namespace towerps
