// MergeRuns: merges the sorted runs of a vector into one sorted sequence, stably: of equal
// items, those of an earlier run come first, each run's in its order. Neighbouring runs are
// merged in pairs (an odd one carried over) until one is left: O(n log k) for n items in k runs.
// A table partition orders a step's pushed ids so, each worker's ids being sorted already, and a
// row's gradients stay in worker-rank order.
//
// Contract: `bounds` holds 0, then the end of each run, increasing, the last being items.size();
// each run is sorted by `less`. On return items is sorted and bounds is {0, items.size()}.
// ({0} when there were none). `scratch` is working space (kept between calls to save allocations).
// Not thread-safe.
#ifndef TOWERPS_COMMON_MERGE_RUNS_H_
#define TOWERPS_COMMON_MERGE_RUNS_H_

#include <algorithm>
#include <cstddef>
#include <vector>

namespace towerps {

template <typename T, typename Less>
void MergeRuns(std::vector<T>& items, std::vector<size_t>& bounds, std::vector<T>& scratch,
               Less less) {
  while (bounds.size() > 2) {
    scratch.resize(items.size());
    size_t kept = 1;
    for (size_t r = 0; r + 1 < bounds.size(); r += 2) {
      const size_t begin = bounds[r], middle = bounds[r + 1];
      const size_t end = bounds[std::min(r + 2, bounds.size() - 1)];
      std::merge(items.begin() + begin, items.begin() + middle, items.begin() + middle,
                 items.begin() + end, scratch.begin() + begin, less);
      bounds[kept++] = end;  // bounds[r..r+2] are read already
    }
    bounds.resize(kept);
    items.swap(scratch);
  }
}

}  // namespace towerps

#endif  // TOWERPS_COMMON_MERGE_RUNS_H_
