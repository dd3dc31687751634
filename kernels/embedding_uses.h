// The uses of each row of an embedding lookup, in the form Backend::EmbeddingBackward takes:
// for a batch's index (index[p] < unique for p < n, p = example * fields + field), row u's uses
// are positions[offsets[u] .. offsets[u + 1]), increasing. A stable counting sort, O(n + unique).
// Summing each row's uses in that order makes the rows' gradients deterministic on every
// backend, threads and GPU included, without atomics.
//
// An embedding bag's uses (Backend::EmbeddingBagBackward) are the same, each use given by its
// example instead of its position.
//
// Contract: pure host functions; `offsets` and `positions` (`examples`) are resized (unique + 1
// and n). An index out of range, or bag offsets that do not start at 0 and never decrease, is a
// bug (checked).
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

// For a multi-hot field of `batch` examples, example b's uses being bags[b] .. bags[b + 1]:
// row u's uses as the examples that make them, examples[offsets[u] .. offsets[u + 1]),
// increasing (an example that holds an id twice appears twice).
inline void BagUses(const uint32_t* index, const uint32_t* bags, int batch, int64_t unique,
                    std::vector<uint32_t>* offsets, std::vector<uint32_t>* examples) {
  TOWERPS_CHECK(bags[0] == 0) << "bags start at use " << bags[0];
  std::vector<uint32_t> example_of(bags[batch]);
  for (int b = 0; b < batch; ++b) {
    TOWERPS_CHECK(bags[b] <= bags[b + 1]) << "bag " << b << " ends before it starts";
    for (uint32_t k = bags[b]; k < bags[b + 1]; ++k) example_of[k] = static_cast<uint32_t>(b);
  }
  EmbeddingUses(index, bags[batch], unique, offsets, examples);
  for (uint32_t& p : *examples) p = example_of[p];
}

// Example b's pooling factor in a bag lookup: 1 / its use count for a mean over a non-empty
// bag, else 1 (Backend::EmbeddingBagForward).
inline float BagScale(const uint32_t* bags, int64_t b, bool mean) {
  const uint32_t n = bags[b + 1] - bags[b];
  return mean && n > 0 ? 1.0f / static_cast<float>(n) : 1.0f;
}

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_EMBEDDING_USES_H_
