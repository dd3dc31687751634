// The uses of each row of an embedding lookup, in the form Backend::EmbeddingBackward takes:
// for a batch's index (index[p] < unique for p < n, p = example * fields + field), row u's uses
// are positions[offsets[u] .. offsets[u + 1]), increasing. A stable counting sort, O(n + unique).
// Summing each row's uses in that order makes the rows' gradients deterministic on every
// backend, threads and GPU included, without atomics.
//
// Contract: a pure host function; `offsets` and `positions` are resized (unique + 1 and n).
// An index out of range is a bug (checked).
#ifndef TOWERPS_KERNELS_EMBEDDING_USES_H_
#define TOWERPS_KERNELS_EMBEDDING_USES_H_

#include <cstdint>
#include <vector>

#include "towerps/check.h"

namespace towerps::kernels {

inline void EmbeddingUses(const uint32_t* index, int64_t n, int64_t unique,
                          std::vector<uint32_t>* offsets, std::vector<uint32_t>* positions) {
  offsets->assign(static_cast<size_t>(unique + 1), 0);
  for (int64_t p = 0; p < n; ++p) {
    TOWERPS_CHECK(index[p] < unique) << "row " << index[p] << " of " << unique << " at " << p;
    ++(*offsets)[index[p] + 1];
  }
  for (int64_t u = 0; u < unique; ++u) (*offsets)[u + 1] += (*offsets)[u];
  positions->resize(static_cast<size_t>(n));
  std::vector<uint32_t> next(offsets->begin(), offsets->end() - 1);
  for (int64_t p = 0; p < n; ++p) (*positions)[next[index[p]]++] = static_cast<uint32_t>(p);
}

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_EMBEDDING_USES_H_
