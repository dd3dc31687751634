#include "ps/server/row_gradients.h"

#include <algorithm>

#include "common/merge_runs.h"
#include "common/prefetch.h"

namespace towerps::ps {

void RowGradients::Form(const std::vector<const Contribution*>& contributions, int64_t dim) {
  dim_ = dim;
  contributions_ = contributions;
  entries_.clear();
  runs_.assign(1, 0);
  for (uint32_t c = 0; c < contributions.size(); ++c) {
    const uint64_t* ids = contributions[c]->ids.u64();
    for (uint32_t i = 0; i < contributions[c]->ids.num_elements(); ++i) {
      entries_.push_back({ids[i], c, i});
    }
    runs_.push_back(entries_.size());
  }
  MergeRuns(entries_, runs_, merged_, [](const Entry& a, const Entry& b) { return a.id < b.id; });
  Group();
}

void RowGradients::FormIds(const uint64_t* ids, int64_t n) {
  contributions_.clear();
  entries_.clear();
  for (uint32_t i = 0; i < static_cast<uint32_t>(n); ++i) entries_.push_back({ids[i], 0, i});
  Group();
}

void RowGradients::Group() {
  groups_.clear();
  for (size_t k = 0; k < entries_.size(); ++k) {
    if (k == 0 || entries_[k].id != entries_[k - 1].id) groups_.push_back(k);
  }
  groups_.push_back(entries_.size());
}

const float* RowGradients::Sum(size_t g, float* out) const {
  const float* first = Row(groups_[g]);
  if (groups_[g + 1] - groups_[g] == 1) return first;  // one worker's row, as it came
  std::copy_n(first, dim_, out);
  for (size_t k = groups_[g] + 1; k < groups_[g + 1]; ++k) {
    const float* more = Row(k);
    for (int64_t j = 0; j < dim_; ++j) out[j] += more[j];
  }
  return out;
}

void RowGradients::Prefetch(size_t g) const {
  for (size_t k = groups_[g]; k < groups_[g + 1]; ++k) PrefetchFloats(Row(k), dim_);
}

}  // namespace towerps::ps
