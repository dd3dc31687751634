#include "ps/server/row_policy.h"

#include <algorithm>
#include <tuple>

namespace towerps::ps {

RowPolicy::RowPolicy(const TablePolicy& policy, AdmissionCoin coin, int64_t versions_per_step,
                     int64_t capacity)
    : policy_(policy),
      coin_(coin),
      versions_per_step_(std::max<int64_t>(1, versions_per_step)),
      capacity_(capacity) {}

bool RowPolicy::Admit(uint64_t id, int64_t version) {
  if (policy_.AdmitsEveryId()) return true;
  if (!coin_.Admits(id)) return false;  // never: nothing to count
  if (policy_.admission_min_count > 1) {
    PendingAdmission& p = pending_[id];
    if (policy_.ttl_steps > 0 && p.count > 0 && version - p.last_seen > TtlVersions()) {
      p.count = 0;  // absent for ttl_steps steps or more: its count starts again
    }
    ++p.count;
    p.last_seen = version;
    if (p.count < policy_.admission_min_count) return false;
    pending_.erase(id);
  }
  ++counts_.admitted;
  return true;
}

void RowPolicy::Updated(RowStore& rows, int64_t r, int64_t version) {
  rows.set_last_update(r, version);
  if (policy_.ttl_steps <= 0) return;
  if (updated_at_.empty()) first_ = version;
  while (first_ + static_cast<int64_t>(updated_at_.size()) <= version) updated_at_.emplace_back();
  updated_at_.back().push_back(rows.id(r));
}

std::vector<int64_t> RowPolicy::ExpiredRows(const RowStore& rows, int64_t version,
                                            std::vector<std::pair<uint64_t, int64_t>>* absent) {
  std::vector<int64_t> expired;
  while (!updated_at_.empty() && version - first_ >= TtlVersions()) {
    for (uint64_t id : updated_at_.front()) {
      const int64_t r = rows.Find(id);
      // Updated again since (a later list has it), or evicted already: not this list's.
      if (r >= 0 && rows.last_update(r) == first_) expired.push_back(r);
      if (r < 0) absent->emplace_back(id, first_);
    }
    updated_at_.pop_front();
    ++first_;
  }
  return expired;
}

std::vector<int64_t> ColdestRows(const RowStore& rows, EvictionOrder order, int64_t keep) {
  if (rows.size() <= keep) return {};
  std::vector<int64_t> index(static_cast<size_t>(rows.size()));
  for (int64_t r = 0; r < rows.size(); ++r) index[static_cast<size_t>(r)] = r;
  auto key = [&](int64_t r) {
    return order == EvictionOrder::kLfu
               ? std::make_tuple(int64_t{rows.updates(r)}, rows.last_update(r), rows.id(r))
               : std::make_tuple(rows.last_update(r), int64_t{rows.updates(r)}, rows.id(r));
  };
  auto first = [&](int64_t a, int64_t b) { return key(a) < key(b); };  // a total order: ids differ
  const auto victims = static_cast<size_t>(rows.size() - keep);
  std::nth_element(index.begin(), index.begin() + static_cast<std::ptrdiff_t>(victims), index.end(),
                   first);
  index.resize(victims);
  std::sort(index.begin(), index.end(), first);
  return index;
}

void RowPolicy::SweepPending(int64_t version) {
  // At fixed versions, so that a restored partition sweeps when the live one did.
  if (version % TtlVersions() != 0) return;
  std::erase_if(pending_, [&](const auto& entry) {
    return version - entry.second.last_seen >= TtlVersions();
  });
}

void RowPolicy::Report(int64_t rows, TableCounters& c) const {
  TableCounters::Store(c.rows, rows);
  TableCounters::Store(c.ids_pending, pending());
  TableCounters::Store(c.rows_admitted, counts_.admitted);
  TableCounters::Store(c.gradients_dropped, counts_.dropped_gradients);
  TableCounters::Store(c.evicted_ttl, counts_.evicted_ttl);
  TableCounters::Store(c.evicted_capacity, counts_.evicted_capacity);
}

RowPolicy RowPolicy::ForTable(const JobConfig& job, const VariableSpec& table) {
  const TablePolicy policy = job.table_policies.For(table);
  // capacity_rows is per server: each of the server's partitions of the table takes an equal
  // share, at least 1 row, so that the server never holds more than capacity_rows (when that is
  // at least its partitions).
  const int64_t share =
      policy.capacity_rows == 0
          ? 0
          : std::max<int64_t>(1, policy.capacity_rows / job.TablePartitionsPerServer(policy));
  return RowPolicy(policy, AdmissionCoin(job.seed, table, policy.admission_probability),
                   job.UpdatesPerStep(), share);
}

void RowPolicy::Save(TableState* s) const {
  std::vector<std::pair<uint64_t, PendingAdmission>> saved(pending_.begin(), pending_.end());
  std::sort(saved.begin(), saved.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const auto n = static_cast<int64_t>(saved.size());
  s->admission_ids = Tensor::Empty({n}, DType::kUInt64);
  s->admission_counts = Tensor::Empty({n}, DType::kUInt32);
  s->admission_last_seen = Tensor::Empty({n}, DType::kUInt64);
  for (size_t i = 0; i < saved.size(); ++i) {
    s->admission_ids.u64()[i] = saved[i].first;
    s->admission_counts.u32()[i] = saved[i].second.count;
    s->admission_last_seen.u64()[i] = static_cast<uint64_t>(saved[i].second.last_seen);
  }
}

Status RowPolicy::Check(const TableState& s, const std::vector<uint64_t>& held) const {
  const auto version = static_cast<uint64_t>(s.version);
  for (int64_t r = 0; r < s.row_last_update.num_elements(); ++r) {
    if (s.row_last_update.u64()[r] > version) {
      return CorruptionError("has a row last updated at version " +
                             std::to_string(s.row_last_update.u64()[r]) + ", after its own " +
                             std::to_string(s.version));
    }
  }
  const int64_t n = s.admission_ids.num_elements();
  if (s.admission_ids.dtype() != DType::kUInt64 || s.admission_counts.dtype() != DType::kUInt32 ||
      s.admission_last_seen.dtype() != DType::kUInt64 || s.admission_counts.num_elements() != n ||
      s.admission_last_seen.num_elements() != n) {
    return CorruptionError("has ids pending admission that do not add up");
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t count = s.admission_counts.u32()[i];
    if (count < 1 || count >= policy_.admission_min_count ||
        s.admission_last_seen.u64()[i] > version ||
        std::binary_search(held.begin(), held.end(), s.admission_ids.u64()[i])) {
      return CorruptionError("has id " + std::to_string(s.admission_ids.u64()[i]) +
                             " pending admission with count " + std::to_string(count) +
                             ", which this table's policy (" + policy_.Describe() +
                             ") or its rows cannot have");
    }
  }
  return Status::Ok();
}

void RowPolicy::Load(const TableState& s) {
  pending_.clear();
  for (int64_t i = 0; i < s.admission_ids.num_elements(); ++i) {
    pending_[s.admission_ids.u64()[i]] = {s.admission_counts.u32()[i],
                                          static_cast<int64_t>(s.admission_last_seen.u64()[i])};
  }
}

void RowPolicy::Rebuild(int64_t version, const TableRows& rows) {
  updated_at_.clear();
  if (policy_.ttl_steps <= 0) return;
  std::vector<std::pair<int64_t, uint64_t>> live;  // (last update, id) within the TTL
  rows.ForEach([&](const RowView& row) {
    if (version - row.last_update < TtlVersions()) live.emplace_back(row.last_update, row.id);
  });
  std::sort(live.begin(), live.end());
  first_ = live.empty() ? version : live.front().first;
  for (const auto& [v, id] : live) {
    while (first_ + static_cast<int64_t>(updated_at_.size()) <= v) updated_at_.emplace_back();
    updated_at_.back().push_back(id);
  }
}

}  // namespace towerps::ps
