#include "ps/server/table_rows.h"

#include <algorithm>
#include <cstring>
#include <tuple>

#include "ps/server/row_policy.h"
#include "towerps/check.h"

namespace towerps::ps {
namespace {

// A state's row tensors for `n` rows of `stride` floats, and row `r` put in them.
void StartRows(TableState* s, int64_t n, int64_t stride) {
  s->ids = Tensor::Empty({n}, DType::kUInt64);
  s->rows = Tensor::Empty({n, stride});
  s->row_updates = Tensor::Empty({n}, DType::kUInt32);
  s->row_last_update = Tensor::Empty({n}, DType::kUInt64);
}

void PutRow(TableState* s, int64_t r, const RowView& row, int64_t stride) {
  s->ids.u64()[r] = row.id;
  s->row_updates.u32()[r] = row.updates;
  s->row_last_update.u64()[r] = static_cast<uint64_t>(row.last_update);
  std::memcpy(s->rows.f32() + r * stride, row.values, static_cast<size_t>(stride) * sizeof(float));
}

}  // namespace

TableRows::TableRows(int64_t stride, std::unique_ptr<DiskRows> disk, int64_t memory_rows,
                     EvictionOrder order)
    : memory_(stride),
      disk_(std::move(disk)),
      memory_rows_(std::max<int64_t>(1, memory_rows)),
      order_(order) {}

TableRows::~TableRows() {
  for (const auto& f : prefetches_) f->ready.wait();  // the reader thread reads into them
}

TableRows TableRows::ForTable(const TablePolicy& policy, const ChunkSpec& spec, int64_t partitions,
                              int64_t stride, RowDisk* disk) {
  if (policy.storage != TableStorage::kRocksdb) {
    return TableRows(stride, nullptr, 0, policy.eviction);
  }
  TOWERPS_CHECK(disk != nullptr) << "table partition " << spec.chunk_id << " has no disk tier";
  return TableRows(stride,
                   std::make_unique<DiskRows>(disk, spec.variable_id, spec.chunk_id, stride),
                   MemoryRows(policy.memory_mb, partitions, stride), policy.eviction);
}

int64_t TableRows::RowBytes(int64_t stride) {
  // The map is at most half full and at least a quarter: up to 4 slots of 16 bytes a row.
  return stride * static_cast<int64_t>(sizeof(float)) + 8 + 4 + 8 + 4 * 16;
}

int64_t TableRows::MemoryRows(double memory_mb, int64_t partitions, int64_t stride) {
  const auto share = static_cast<int64_t>(memory_mb * (1 << 20)) / std::max<int64_t>(1, partitions);
  return std::max<int64_t>(1, share / RowBytes(stride));
}

void TableRows::Load(const std::vector<uint64_t>& ids, size_t asked) {
  if (!disk_) return;
  row_reads_ += static_cast<int64_t>(asked);
  if (disk_->size() == 0) return;
  const auto bytes = static_cast<size_t>(memory_.stride()) * sizeof(float);
  std::vector<uint64_t> absent, loaded;
  auto bring_in = [&](uint64_t id, const DiskRow& row) {
    bool added = false;
    const int64_t r = memory_.Insert(id, &added);
    std::memcpy(memory_.row(r), row.values, bytes);
    memory_.set_updates(r, row.updates);
    memory_.set_last_update(r, row.last_update);
    loaded.push_back(id);
  };
  for (uint64_t id : ids) {
    if (memory_.Find(id) >= 0) continue;
    const auto seen = recent_.find(id);
    if (seen == recent_.end()) {
      absent.push_back(id);
    } else if (seen->second.offset >= 0) {  // a lookup read it since the last update
      ++recent_hits_;
      bring_in(id, {recent_values_.data() + seen->second.offset, seen->second.updates,
                    seen->second.last_update});
    }
  }
  disk_->Read(absent.data(), absent.size(),
              [&](size_t i, const DiskRow& row) { bring_in(absent[i], row); });
  copies_.insert(loaded.begin(), loaded.end());  // their records stay (a delete costs a write)
}

void TableRows::ReadMisses(const uint64_t* ids, size_t n, const int64_t* memory,
                           const std::function<void(size_t, const DiskRow&)>& found) const {
  if (!disk_) return;
  row_reads_ += static_cast<int64_t>(n);
  const size_t most = std::max<size_t>(4096, static_cast<size_t>(memory_rows_ / 8));
  if (recent_.size() >= most) ForgetRecent();
  Collect();  // even with nothing on disk now: the prefetches end at each lookup
  if (disk_->size() == 0) return;
  std::vector<uint64_t> misses;
  std::vector<size_t> where;
  for (size_t i = 0; i < n; ++i) {
    if (memory[i] >= 0) continue;
    const auto seen = recent_.find(ids[i]);
    if (seen == recent_.end()) {
      misses.push_back(ids[i]);
      where.push_back(i);
    } else if (seen->second.offset >= 0) {
      ++recent_hits_;
      found(i, {recent_values_.data() + seen->second.offset, seen->second.updates,
                seen->second.last_update});
    }
  }
  const int64_t stride = memory_.stride();
  // Kept only while there is room; an id not kept is asked of the disk again by its update.
  const bool keep = recent_.size() + misses.size() <= most;
  if (keep) {
    for (uint64_t id : misses) recent_[id] = {-1, 0, 0};  // until the disk says otherwise
  }
  disk_->Read(misses.data(), misses.size(), [&](size_t k, const DiskRow& row) {
    if (keep) {
      recent_[misses[k]] = {static_cast<int64_t>(recent_values_.size()), row.updates,
                            row.last_update};
      recent_values_.insert(recent_values_.end(), row.values, row.values + stride);
    }
    found(where[k], row);
  });
}

void TableRows::ForgetRecent() const {
  recent_.clear();
  recent_values_.clear();
}

void TableRows::Prefetch(const uint64_t* ids, size_t n) {
  if (!disk_ || disk_->size() == 0) return;
  auto f = std::make_shared<Fetched>();
  for (size_t i = 0; i < n; ++i) {
    if (memory_.Find(ids[i]) < 0 && recent_.count(ids[i]) == 0) f->ids.push_back(ids[i]);
  }
  if (f->ids.empty()) return;
  f->ready = f->done.get_future();
  prefetches_.push_back(f);
  const DiskRows* rows = disk_.get();
  disk_->disk()->Post([f, rows] {
    f->rows.assign(f->ids.size(), Recent{-1, 0, 0});
    rows->Fetch(f->ids.data(), f->ids.size(), [&](size_t i, const DiskRow& row) {
      f->rows[i] = {static_cast<int64_t>(f->values.size()), row.updates, row.last_update};
      f->values.insert(f->values.end(), row.values, row.values + rows->stride());
    });
    f->done.set_value();
  });
}

void TableRows::Collect() const {
  const size_t most = std::max<size_t>(4096, static_cast<size_t>(memory_rows_ / 8));
  const int64_t stride = memory_.stride();
  for (const auto& f : prefetches_) {
    f->ready.wait();
    disk_->Counted(static_cast<int64_t>(f->ids.size()));
    for (size_t i = 0; i < f->ids.size() && recent_.size() < most; ++i) {
      if (touched_.count(f->ids[i]) != 0 || recent_.count(f->ids[i]) != 0) continue;
      Recent r = f->rows[i];
      if (r.offset >= 0) {
        const float* values = f->values.data() + r.offset;
        r.offset = static_cast<int64_t>(recent_values_.size());
        recent_values_.insert(recent_values_.end(), values, values + stride);
      }
      recent_[f->ids[i]] = r;
    }
  }
  prefetches_.clear();
  touched_.clear();
}

void TableRows::Report(TableCounters& c) const {
  if (!disk_) return;
  const DiskCounts& disk = disk_->counts();
  TableCounters::Store(c.rows_on_disk, on_disk());
  TableCounters::Store(c.row_reads, row_reads_);
  TableCounters::Store(c.disk_reads, disk.reads);
  TableCounters::Store(c.disk_hits, disk.hits + recent_hits_);
  TableCounters::Store(c.disk_writes, disk.writes);
}

void TableRows::EraseEvictedCopies() {
  if (evicted_copies_.empty()) return;
  const std::vector<uint64_t> ids(evicted_copies_.begin(), evicted_copies_.end());
  Touch(ids);
  disk_->Erase(ids);
  evicted_copies_.clear();
}

void TableRows::Spill() {
  ForgetRecent();  // the update that ends here may have changed the disk
  EraseEvictedCopies();
  if (!disk_ || memory_.size() <= memory_rows_) return;
  const std::vector<int64_t> cold = ColdestRows(memory_, order_, memory_rows_ - memory_rows_ / 16);
  std::vector<uint64_t> ids;
  std::vector<DiskRow> rows;
  ids.reserve(cold.size());
  rows.reserve(cold.size());
  int64_t replacing = 0;  // rows whose stale record the write overwrites
  for (int64_t r : cold) {
    ids.push_back(memory_.id(r));
    rows.push_back({memory_.row(r), memory_.updates(r), memory_.last_update(r)});
    replacing += static_cast<int64_t>(copies_.erase(memory_.id(r)));
  }
  Touch(ids);
  disk_->Write(ids, rows, replacing);  // before any removal moves a row
  for (uint64_t id : ids) memory_.Remove(memory_.Find(id));
}

int64_t TableRows::ExpireOnDisk(const std::vector<std::pair<uint64_t, int64_t>>& candidates,
                                const std::function<void(uint64_t, const float*)>& before) {
  if (!disk_ || candidates.empty() || disk_->size() == 0) return 0;
  std::vector<uint64_t> ids;
  std::vector<int64_t> versions;
  for (const auto& c : candidates) {
    if (evicted_copies_.count(c.first)) continue;  // evicted from memory: a stale record
    ids.push_back(c.first);
    versions.push_back(c.second);
  }
  std::vector<uint64_t> expired;
  disk_->Read(
      ids.data(), ids.size(),
      [&](size_t i, const DiskRow& row) {
        if (row.last_update != versions[i]) return;  // updated since: a later list's
        before(ids[i], row.values);
        expired.push_back(ids[i]);
      },
      /*serving=*/false);
  // A candidate named twice (by two lists that expire together) is on disk once.
  std::sort(expired.begin(), expired.end());
  expired.erase(std::unique(expired.begin(), expired.end()), expired.end());
  Touch(expired);
  disk_->Erase(expired);
  return static_cast<int64_t>(expired.size());
}

void TableRows::ForEach(const std::function<void(const RowView&)>& each, bool disk) const {
  std::vector<int64_t> order(static_cast<size_t>(memory_.size()));
  for (int64_t r = 0; r < memory_.size(); ++r) order[static_cast<size_t>(r)] = r;
  std::sort(order.begin(), order.end(),
            [this](int64_t a, int64_t b) { return memory_.id(a) < memory_.id(b); });
  size_t next = 0;  // the next memory row to report
  auto memory_until = [&](uint64_t bound, bool all) {
    for (; next < order.size() && (all || memory_.id(order[next]) < bound); ++next) {
      const int64_t r = order[next];
      each({memory_.id(r), memory_.row(r), memory_.updates(r), memory_.last_update(r)});
    }
  };
  if (disk_ && disk) {
    disk_->Scan([&](uint64_t id, const DiskRow& row) {
      if (copies_.count(id)) return;  // a stale record: the row in memory is reported
      memory_until(id, false);
      each({id, row.values, row.updates, row.last_update});
    });
  }
  memory_until(0, true);
}

void TableRows::Save(TableState* s, bool on_tier) const {
  const int64_t stride = memory_.stride();
  on_tier = on_tier && disk_ != nullptr;
  StartRows(s, on_tier ? memory_.size() : size(), stride);
  int64_t r = 0;
  ForEach([&](const RowView& row) { PutRow(s, r++, row, stride); }, !on_tier);
  s->on_tier = on_tier;
}

void TableRows::OnDisk(const std::vector<uint64_t>& ids,
                       const std::function<void(uint64_t id)>& found) const {
  constexpr size_t kBatch = 1 << 16;  // keys and values in flight stay a few MB
  for (size_t at = 0; at < ids.size(); at += kBatch) {
    const size_t n = std::min(kBatch, ids.size() - at);
    disk_->Read(
        ids.data() + at, n, [&](size_t i, const DiskRow&) { found(ids[at + i]); },
        /*serving=*/false);
  }
}

void TableRows::SaveChanges(TableState* s) const {
  const std::vector<uint64_t> ids = changed_.Sorted();
  const int64_t stride = memory_.stride();
  // The changed rows memory lacks are read from disk first (in one batch), kept by position.
  std::vector<int64_t> memory(ids.size()), offset(ids.size(), -1);
  std::vector<DiskRow> disk_rows(ids.size());
  std::vector<float> values;
  std::vector<uint64_t> misses;
  std::vector<size_t> where;
  for (size_t i = 0; i < ids.size(); ++i) {
    memory[i] = memory_.Find(ids[i]);
    if (memory[i] < 0 && disk_) misses.push_back(ids[i]), where.push_back(i);
  }
  if (!misses.empty()) {
    disk_->Read(
        misses.data(), misses.size(),
        [&](size_t k, const DiskRow& row) {
          offset[where[k]] = static_cast<int64_t>(values.size());
          disk_rows[where[k]] = {nullptr, row.updates, row.last_update};
          values.insert(values.end(), row.values, row.values + stride);
        },
        /*serving=*/false);
  }
  std::vector<RowView> held;  // by increasing id
  std::vector<uint64_t> removed;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (const int64_t r = memory[i]; r >= 0) {
      held.push_back({ids[i], memory_.row(r), memory_.updates(r), memory_.last_update(r)});
    } else if (offset[i] >= 0) {
      held.push_back(
          {ids[i], values.data() + offset[i], disk_rows[i].updates, disk_rows[i].last_update});
    } else {
      removed.push_back(ids[i]);
    }
  }
  StartRows(s, static_cast<int64_t>(held.size()), stride);
  for (size_t r = 0; r < held.size(); ++r) PutRow(s, static_cast<int64_t>(r), held[r], stride);
  s->removed_ids = Tensor::Empty({static_cast<int64_t>(removed.size())}, DType::kUInt64);
  std::copy(removed.begin(), removed.end(), s->removed_ids.u64());
  s->changes_only = true;
}

void TableRows::Load(const TableState& s) {
  TrackChanges(false);
  Collect();  // the prefetches end, and all they read goes with recent_
  ForgetRecent();
  copies_.clear();
  evicted_copies_.clear();
  memory_.Clear();
  over_tier_ = disk_ && s.on_tier;
  if (over_tier_) {  // the tier was opened from the checkpoint's (ps/server/row_disk.h)
    disk_->Recount();
    std::vector<uint64_t> removed, gone;
    if (s.removed_ids.defined() && s.removed_ids.num_elements() > 0) {
      removed.assign(s.removed_ids.u64(), s.removed_ids.u64() + s.removed_ids.num_elements());
    }
    OnDisk(removed, [&gone](uint64_t id) { gone.push_back(id); });
    disk_->Erase(gone);
  } else if (disk_) {
    disk_->Clear();
  }
  const int64_t stride = memory_.stride();
  const int64_t n = s.ids.num_elements();
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) order[static_cast<size_t>(r)] = r;
  if (disk_) {  // the hottest rows into memory first, by the eviction order: what a spill keeps
    auto key = [&](int64_t r) {
      const int64_t updates = s.row_updates.u32()[r];
      const auto last = static_cast<int64_t>(s.row_last_update.u64()[r]);
      return order_ == EvictionOrder::kLfu ? std::make_tuple(updates, last, s.ids.u64()[r])
                                           : std::make_tuple(last, updates, s.ids.u64()[r]);
    };
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(b) < key(a); });
  }
  for (int64_t r : order) {
    Add({s.ids.u64()[r], s.rows.f32() + r * stride, s.row_updates.u32()[r],
         static_cast<int64_t>(s.row_last_update.u64()[r])});
  }
  Flush();
  if (over_tier_) {  // the records the tier holds of rows in memory are copies
    std::vector<uint64_t> ids(static_cast<size_t>(memory_.size()));
    for (int64_t r = 0; r < memory_.size(); ++r) ids[static_cast<size_t>(r)] = memory_.id(r);
    OnDisk(ids, [this](uint64_t id) { copies_.insert(id); });
  }
  over_tier_ = false;
}

void TableRows::Add(const RowView& row) {
  const int64_t stride = memory_.stride();
  if (!disk_ || memory_.size() < memory_rows_) {
    bool added = false;
    const int64_t r = memory_.Insert(row.id, &added);
    std::memcpy(memory_.row(r), row.values, static_cast<size_t>(stride) * sizeof(float));
    memory_.set_updates(r, row.updates);
    memory_.set_last_update(r, row.last_update);
    return;
  }
  pending_ids_.push_back(row.id);
  pending_values_.insert(pending_values_.end(), row.values, row.values + stride);
  pending_rows_.push_back({nullptr, row.updates, row.last_update});
  constexpr size_t kBatchRows = 4096;
  if (pending_ids_.size() >= kBatchRows) Flush();
}

void TableRows::Flush() {
  if (pending_ids_.empty()) return;
  const int64_t stride = memory_.stride();
  for (size_t i = 0; i < pending_rows_.size(); ++i) {
    pending_rows_[i].values = pending_values_.data() + static_cast<int64_t>(i) * stride;
  }
  int64_t replacing = 0;  // records a tier opened from a checkpoint holds already
  if (over_tier_) OnDisk(pending_ids_, [&replacing](uint64_t) { ++replacing; });
  disk_->Write(pending_ids_, pending_rows_, replacing);
  pending_ids_.clear();
  pending_values_.clear();
  pending_rows_.clear();
}

}  // namespace towerps::ps
