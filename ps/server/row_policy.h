// RowPolicy: a table partition's admission and eviction (the table's TablePolicy,
// job/table_policy.h), applied to its RowStore by the partition (ps/server/table_chunk.h).
//
// Admission. An id without a row is counted each update it appears in (in sync, each step);
// it gets a row at the update that brings its count to `min_count`, if the table's coin admits
// it at all. The counts are exact: one hash-map entry (about 40 bytes) per id pending
// admission, against a row's (1 + slots) * dim * 4 + 24 and its share of the id map. With a
// TTL, a pending count whose id has been absent for ttl_steps steps or more starts again from 0
// (checked when the id comes back, so the entries a sweep drops, every TTL of versions, are only
// ever ones that would start again).
//
// Eviction, after each update (EndUpdate), in an order that depends only on the partition's
// state: first every row not updated for ttl_steps steps, its last update that many or more
// behind (found through
// per-version lists of the ids updated then), then, while the partition holds more than its
// share of capacity_rows, the least-frequently (fewest updates, then oldest update) or
// least-recently updated rows (oldest update, then fewest updates), ties broken by id, down to
// 15/16 of that share, so that a sweep over the rows is paid once per 1/16 of it, not every
// step. An evicted id has no row again: it reads its initial values and, once admitted again,
// starts from them.
//
// Versions are the partition's: a step is UpdatesPerStep() of them.
//
// Contract: owned and used by one partition, on its thread; not thread-safe. Its state is the
// pending counts (Save/Load); the TTL's lists are rebuilt from the rows (Rebuild). The counts
// (counts()) start at 0 in every process, a restored one too.
#ifndef TOWERPS_PS_SERVER_ROW_POLICY_H_
#define TOWERPS_PS_SERVER_ROW_POLICY_H_

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "job/job_config.h"
#include "job/table_policy.h"
#include "ps/server/holder_state.h"
#include "ps/server/row_store.h"
#include "ps/server/server_stats.h"
#include "ps/server/table_rows.h"
#include "towerps/result.h"

namespace towerps::ps {

// The rows of `rows` beyond the `keep` an eviction keeps, coldest first: fewest updates, then
// oldest update (lfu), or oldest update, then fewest updates (lru), ties broken by id. Indices
// into `rows`, which the caller removes by id (a removal moves the last row).
std::vector<int64_t> ColdestRows(const RowStore& rows, EvictionOrder order, int64_t keep);

// What a partition's policy has done, since it started (a restore keeps the counts at 0).
struct RowPolicyCounts {
  int64_t admitted = 0;           // ids given a row after waiting (min_count > 1 or the coin)
  int64_t dropped_gradients = 0;  // updates' ids not (yet) admitted, their gradients dropped
  int64_t evicted_ttl = 0;
  int64_t evicted_capacity = 0;
};

// A pending id's count and the version it was last counted at.
struct PendingAdmission {
  uint32_t count = 0;
  int64_t last_seen = 0;
};

class RowPolicy {
 public:
  // `versions_per_step`: the job's UpdatesPerStep(); `capacity`: this partition's share of
  // capacity_rows (0: none); `coin`: the table's AdmissionCoin.
  RowPolicy(const TablePolicy& policy, AdmissionCoin coin, int64_t versions_per_step,
            int64_t capacity);

  const TablePolicy& policy() const { return policy_; }
  bool active() const { return !policy_.AdmitsEveryId() || policy_.Evicts(); }
  const RowPolicyCounts& counts() const { return counts_; }
  int64_t pending() const { return static_cast<int64_t>(pending_.size()); }

  // An id without a row appears in the update to `version`: whether it gets one now.
  bool Admit(uint64_t id, int64_t version);
  // An update's gradients of n ids not admitted were dropped.
  void Dropped(int64_t n) { counts_.dropped_gradients += n; }
  // Row r of `rows` was updated to `version` (sets its last update).
  void Updated(RowStore& rows, int64_t r, int64_t version);
  // After the update to `version`: removes the rows the policy evicts, in order, from `rows`,
  // calling before(r) with each just before it goes (so that the partition can keep its value).
  // The ids a TTL list names that `rows` lacks go to elsewhere(candidates), each with the
  // version its list is for: a disk tier evicts those of its rows last updated then, and returns
  // how many (ps/server/table_rows.h).
  template <typename Before, typename Elsewhere>
  void EndUpdate(RowStore& rows, int64_t version, Before before, Elsewhere elsewhere);

  // The policy of `table` in `job` (TablePolicies::For), its partition's share of the capacity.
  static RowPolicy ForTable(const JobConfig& job, const VariableSpec& table);

  // Stores the partition's counters: the rows held (`rows`), the ids pending and the counts.
  void Report(int64_t rows, TableCounters& counters) const;

  // The pending counts into a state (admission_ids, _counts, _last_seen: by increasing id), and
  // back. Check says whether a state's add up (the ids are the partition's to check); Load
  // takes a checked one.
  // Check also refuses what a live partition never holds: a row or pending id seen after the
  // state's version, a count outside [1, min_count), a pending id that has a row (`held`: the
  // state's row ids, sorted).
  void Save(TableState* s) const;
  Status Check(const TableState& s, const std::vector<uint64_t>& held) const;
  void Load(const TableState& s);
  // The TTL's per-version lists, from the last updates of a restored partition's rows (in
  // both tiers), at its `version`.
  void Rebuild(int64_t version, const TableRows& rows);

 private:
  int64_t TtlVersions() const { return policy_.ttl_steps * versions_per_step_; }
  // The rows EndUpdate evicts by TTL, in order; the ids their lists name that `rows` lacks
  // into `absent`, with their lists' versions.
  std::vector<int64_t> ExpiredRows(const RowStore& rows, int64_t version,
                                   std::vector<std::pair<uint64_t, int64_t>>* absent);
  void SweepPending(int64_t version);

  const TablePolicy policy_;
  const AdmissionCoin coin_;
  const int64_t versions_per_step_;
  const int64_t capacity_;
  RowPolicyCounts counts_;
  std::unordered_map<uint64_t, PendingAdmission> pending_;
  // TTL: the ids updated at each version still within the TTL, oldest first, from first_.
  std::deque<std::vector<uint64_t>> updated_at_;
  int64_t first_ = 0;  // the version updated_at_.front() lists
};

template <typename Before, typename Elsewhere>
void RowPolicy::EndUpdate(RowStore& rows, int64_t version, Before before, Elsewhere elsewhere) {
  if (!policy_.Evicts()) return;
  // Each reason's rows are chosen before any goes (a removal moves the last row), then removed
  // by id, so a row index is looked up again after every removal.
  auto remove = [&](const std::vector<int64_t>& chosen, int64_t* count) {
    std::vector<uint64_t> ids;
    ids.reserve(chosen.size());
    for (int64_t r : chosen) ids.push_back(rows.id(r));
    for (uint64_t id : ids) {
      const int64_t r = rows.Find(id);
      before(r);
      rows.Remove(r);
    }
    *count += static_cast<int64_t>(ids.size());
  };
  if (policy_.ttl_steps > 0) {
    std::vector<std::pair<uint64_t, int64_t>> absent;
    remove(ExpiredRows(rows, version, &absent), &counts_.evicted_ttl);
    if (!absent.empty()) counts_.evicted_ttl += elsewhere(absent);
  }
  if (capacity_ > 0 && rows.size() > capacity_) {
    remove(ColdestRows(rows, policy_.eviction, capacity_ - capacity_ / 16),
           &counts_.evicted_capacity);
  }
  if (policy_.ttl_steps > 0) SweepPending(version);
}

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_ROW_POLICY_H_
