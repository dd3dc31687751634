// ChangedIds: the ids of a table partition's rows that changed (were updated, or evicted) since
// its last checkpoint, for the next incremental one (ps/server/checkpoint_chain.h).
//
// Add is amortised O(1): ids are appended and, whenever the list has doubled since it was last
// compacted, sorted and deduplicated in place. So memory stays under about twice the distinct
// ids changed (at least kMinCapacity), however often a hot row changes.
//
// Contract: a plain value, owned by one thread.
#ifndef TOWERPS_PS_SERVER_CHANGED_IDS_H_
#define TOWERPS_PS_SERVER_CHANGED_IDS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace towerps::ps {

class ChangedIds {
 public:
  void Add(uint64_t id) {
    ids_.push_back(id);
    if (ids_.size() >= compact_at_) Compact();
  }
  // The distinct ids added since the last Clear, increasing.
  std::vector<uint64_t> Sorted() const {
    std::vector<uint64_t> out = ids_;
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  void Clear() {
    std::vector<uint64_t>().swap(ids_);
    compact_at_ = kMinCapacity;
  }

 private:
  static constexpr size_t kMinCapacity = size_t{1} << 16;
  void Compact() {
    std::sort(ids_.begin(), ids_.end());
    ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
    compact_at_ = std::max(kMinCapacity, 2 * ids_.size());
  }

  std::vector<uint64_t> ids_;
  size_t compact_at_ = kMinCapacity;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_CHANGED_IDS_H_
