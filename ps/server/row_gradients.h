// RowGradients: one table update's pushed gradients, by row. Every (contribution, row) of the
// update is ordered by id, then by worker rank, and grouped by id: each contribution's ids are
// increasing already (a push is checked so), so the contributions' runs are merged stably
// (common/merge_runs.h) rather than sorted. A row's gradient is its one pushed row, or the sum of
// its rows in rank order, so a sync update forms the same bits whatever order its pushes arrived
// in.
//
// Contract: scratch owned by one table partition and reused by its updates (to save
// allocations); not thread-safe. The contributions given to Form must outlive the calls that
// read them (Sum, Prefetch, ForEachEntry); after FormIds only rows() and id() may be called.
#ifndef TOWERPS_PS_SERVER_ROW_GRADIENTS_H_
#define TOWERPS_PS_SERVER_ROW_GRADIENTS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ps/server/update_rule.h"

namespace towerps::ps {

class RowGradients {
 public:
  // The rows of `contributions` (in rank order, each one's ids increasing), of `dim` floats.
  void Form(const std::vector<const Contribution*>& contributions, int64_t dim);
  // A replayed step's rows, `ids` (increasing), whose gradients come apart (no Sum).
  void FormIds(const uint64_t* ids, int64_t n);

  size_t rows() const { return groups_.size() - 1; }
  uint64_t id(size_t g) const { return entries_[groups_[g]].id; }
  // Calls each(contribution, row) for the pushed rows of row g, in rank order.
  template <typename Each>
  void ForEachEntry(size_t g, Each each) const {
    for (size_t k = groups_[g]; k < groups_[g + 1]; ++k) {
      each(*contributions_[entries_[k].contribution], entries_[k].row);
    }
  }
  // Row g's gradient: its one pushed row, or the rank-ordered sum of its pushed rows, formed in
  // `out` (dim floats).
  const float* Sum(size_t g, float* out) const;
  // Brings row g's pushed rows towards the cache, for a Sum soon after.
  void Prefetch(size_t g) const;

 private:
  struct Entry {
    uint64_t id;
    uint32_t contribution;
    uint32_t row;
  };
  const float* Row(size_t k) const {
    return contributions_[entries_[k].contribution]->gradient.f32() + entries_[k].row * dim_;
  }
  void Group();

  int64_t dim_ = 0;
  std::vector<const Contribution*> contributions_;
  std::vector<Entry> entries_, merged_;  // merged_: Form's scratch
  std::vector<size_t> runs_;             // Form's: 0, then where each sorted run of entries_ ends
  std::vector<size_t> groups_;           // where each id's entries start, then entries_.size()
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_ROW_GRADIENTS_H_
