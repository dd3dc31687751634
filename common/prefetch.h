// PrefetchFloats: a hint that `n` floats at `p` will be read soon (a table's row, a pushed
// gradient row), one per 64-byte line, so that the cache misses of rows read one after another
// overlap instead of following each other.
//
// Contract: a hint only: nothing is read, `p` need not be aligned, and an invalid address is
// ignored by the CPU.
#ifndef TOWERPS_COMMON_PREFETCH_H_
#define TOWERPS_COMMON_PREFETCH_H_

#include <cstdint>

namespace towerps {

inline void PrefetchFloats(const float* p, int64_t n) {
  for (int64_t off = 0; off < n; off += 16) __builtin_prefetch(p + off);  // 16 floats a line
}

}  // namespace towerps

#endif  // TOWERPS_COMMON_PREFETCH_H_
