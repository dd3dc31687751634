// TableRows: the rows a table partition holds, wherever they live. In memory (RowStore) always;
// with storage=rocksdb (job/table_policy.h), the rows beyond the partition's memory budget live
// on disk (DiskRows, ps/server/row_disk.h).
//
// A row is updated only in memory: an update's rows on disk are brought in first (Load). Their
// records stay on disk (copies_: erasing one costs RocksDB as much as writing it), stale once
// the row is updated, and never read while the row is in memory, which every read asks first; a
// spill overwrites the record, and an eviction from memory erases it. After an update, while memory
// holds more than its budget of rows, the coldest go to disk (Spill: least-frequently or
// least-recently updated, as the table's eviction order says, down to 15/16 of the budget), values,
// optimizer state, update count and last update alike, so a row read back has exactly the bits it
// left with. Which rows are in memory depends only on the partition's updates and restores (a
// restore puts the hottest first, by the same order), and never changes a value: the rows' bits are
// those of a table held whole in memory.
//
// The budget in rows is memory_mb's share for the partition (the server's partitions of the
// table share it equally, a replicated server's backup partitions too) over RowBytes(): a row's
// floats, its id, count and last update, and its share of the id map. A step's rows read from
// disk (recent_, below) and RocksDB's cache and memtables come on top. Without a disk tier
// there is no budget.
//
// A push's next pull may be read ahead (Prefetch) on the tier's reader thread while the update
// runs; a lookup never sees a row as it was before that update changed it on disk.
//
// For incremental checkpoints (ps/server/checkpoint_chain.h), while tracking is on, the ids of
// the rows an update changed or an eviction removed are kept (ChangedIds) until the next
// checkpoint's save; a restore (Load of a state) stops tracking, since what changed since the
// chain's last file is then unknown.
//
// Contract: owned and used by one partition, on its thread; not thread-safe.
#ifndef TOWERPS_PS_SERVER_TABLE_ROWS_H_
#define TOWERPS_PS_SERVER_TABLE_ROWS_H_

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "job/placement.h"
#include "job/table_policy.h"
#include "ps/server/changed_ids.h"
#include "ps/server/holder_state.h"
#include "ps/server/row_disk.h"
#include "ps/server/row_store.h"
#include "ps/server/server_stats.h"

namespace towerps::ps {

// A row as the partition reports it: its floats (values, then optimizer state), its update
// count and its last update's version.
struct RowView {
  uint64_t id = 0;
  const float* values = nullptr;
  uint32_t updates = 0;
  int64_t last_update = 0;
};

class TableRows {
 public:
  // `disk`: the partition's disk tier, or null (memory only; `memory_rows` is then ignored).
  TableRows(int64_t stride, std::unique_ptr<DiskRows> disk, int64_t memory_rows,
            EvictionOrder order);
  ~TableRows();  // waits for its prefetches

  // The rows of a partition (`spec`) of a table with `policy`, whose server holds `partitions`
  // of the table's partitions, each row `stride` floats. `disk`: the server's tier, which
  // storage=rocksdb needs.
  static TableRows ForTable(const TablePolicy& policy, const ChunkSpec& spec, int64_t partitions,
                            int64_t stride, RowDisk* disk);
  // The memory budget, in rows, of `memory_mb` shared by `partitions` partitions of rows of
  // `stride` floats (at least 1).
  static int64_t MemoryRows(double memory_mb, int64_t partitions, int64_t stride);
  // Bytes a row of `stride` floats takes in memory: floats, id, count, last update, map slots.
  static int64_t RowBytes(int64_t stride);

  RowStore& memory() { return memory_; }
  const RowStore& memory() const { return memory_; }
  bool tiered() const { return disk_ != nullptr; }
  int64_t size() const { return memory_.size() + on_disk(); }
  // Rows whose only home is the disk (not the records of rows in memory).
  int64_t on_disk() const {
    return disk_ ? disk_->size() - static_cast<int64_t>(copies_.size()) : 0;
  }
  size_t bytes() const { return memory_.bytes(); }

  // For an update: the rows of `ids` that are on disk move into memory, so that memory finds
  // every row the partition holds of them. `ids` are those of the update's `asked` rows that
  // memory lacks (the others count as read from memory, for the hit rate).
  void Load(const std::vector<uint64_t>& ids, size_t asked);
  // Reads ids[0, n)'s rows: memory[i] >= 0 is its index in memory; else found(i, row) is
  // called for each one on disk (in no particular order); the rest are not held.
  void ReadMisses(const uint64_t* ids, size_t n, const int64_t* memory,
                  const std::function<void(size_t i, const DiskRow& row)>& found) const;
  // After an update: the coldest rows over the budget go to disk.
  void Spill();
  // A lookup of `ids` comes after the update that runs next (a push's thenPull): the rows of them
  // that memory and the recent reads lack are read meanwhile on the tier's reader thread
  // (RowDisk::Post). The next lookup takes what was read (Collect) but the rows the disk changed
  // since (touched_: written or erased while a prefetch was out), which it asks the disk again.
  void Prefetch(const uint64_t* ids, size_t n);
  // Of `candidates` (ids memory lacks, each with the version a TTL list names it at), those on
  // disk whose last update is that version, which `before` sees, then erased: TTL eviction of
  // rows on disk. Returns how many went.
  int64_t ExpireOnDisk(const std::vector<std::pair<uint64_t, int64_t>>& candidates,
                       const std::function<void(uint64_t id, const float* values)>& before);

  // Stores the tier's counters (rows on disk, rows read and how many of them from disk, disk
  // reads and writes) in the partition's.
  void Report(TableCounters& counters) const;

  // Every row (`disk` false: those in memory), in increasing order of id.
  void ForEach(const std::function<void(const RowView&)>& each, bool disk = true) const;
  // Every row into a state (ids, rows, row_updates, row_last_update: by increasing id), and
  // back from a checked one: memory takes the hottest rows up to its budget, the disk the rest.
  // `on_tier`, when tiered: only the rows in memory, the state says the rest are on the tier
  // (TableState::on_tier) for a full checkpoint that keeps the tier's own checkpoint
  // (ps/server/tier_checkpoint.h); EraseEvictedCopies must have run since the last eviction, so
  // that the tier holds no row that is gone. Loading such a state, the tier must hold that
  // checkpoint's records (the server opened it so): the state's removed ids are erased from it,
  // its rows (newer than the tier's records of them) go in as usual.
  void Save(TableState* s, bool on_tier = false) const;
  void Load(const TableState& s);
  // Erases the records of the rows evicted from memory since the last Spill (which does it too).
  void EraseEvictedCopies();

  // Change tracking for checkpoint deltas: on (from now) or off; Changed notes a row's id.
  void TrackChanges(bool on) {
    tracking_ = on;
    changed_.Clear();
  }
  bool tracking() const { return tracking_; }
  void Changed(uint64_t id) {
    if (tracking_) changed_.Add(id);
  }
  // Row `id` was evicted (a change, as Changed): from memory, its record on disk, if any, goes
  // at the next Spill (and no TTL check of the disk sees it meanwhile).
  void Evicted(uint64_t id) {
    Changed(id);
    if (copies_.erase(id) > 0) evicted_copies_.insert(id);
  }
  // The rows changed since tracking started into `s`, as Save puts them, and the ids changed
  // and no longer held into s->removed_ids (increasing).
  void SaveChanges(TableState* s) const;

 private:
  // Calls found(id) for each of `ids` with a record on disk (tier reads, in batches).
  void OnDisk(const std::vector<uint64_t>& ids,
              const std::function<void(uint64_t id)>& found) const;
  void Add(const RowView& row);
  void Flush();  // Add's rows bound for disk

  RowStore memory_;
  const std::unique_ptr<DiskRows> disk_;
  const int64_t memory_rows_;
  const EvictionOrder order_;
  mutable int64_t row_reads_ = 0;  // rows a lookup or an update asked for, while tiered
  // What lookups read from disk since the last update ended: each id's row, or that the disk
  // lacks it (offset -1). An update's Load takes them from here instead of asking the disk
  // again, as a step pulls its rows before it pushes them. The disk changes only inside
  // updates, so these stay exact until the update ends (Spill forgets them); at most an eighth
  // of the memory budget's rows (at least 4096) are kept, then they start again.
  struct Recent {
    int64_t offset;  // into recent_values_, or -1
    uint32_t updates;
    int64_t last_update;
  };
  mutable std::unordered_map<uint64_t, Recent> recent_;
  mutable std::vector<float> recent_values_;
  mutable int64_t recent_hits_ = 0;  // rows on disk served from recent_
  void ForgetRecent() const;
  // Prefetched rows, filled on the reader thread until `ready`.
  struct Fetched {
    std::vector<uint64_t> ids;
    std::vector<Recent> rows;  // offsets into `values`, or -1: not on disk
    std::vector<float> values;
    std::promise<void> done;
    std::future<void> ready;
  };
  mutable std::vector<std::shared_ptr<Fetched>> prefetches_;
  mutable std::unordered_set<uint64_t> touched_;
  // Puts what the prefetches read into recent_ (waiting for them), but the touched rows.
  void Collect() const;
  // The disk changed `ids`: what a prefetch out now read of them is stale.
  void Touch(const std::vector<uint64_t>& ids) {
    if (!prefetches_.empty()) touched_.insert(ids.begin(), ids.end());
  }
  // Add's rows bound for disk, written by Flush; over_tier_: while Load adds rows to a tier
  // that holds a checkpoint's records, some of which they replace.
  bool over_tier_ = false;
  std::vector<uint64_t> pending_ids_;
  std::vector<float> pending_values_;
  std::vector<DiskRow> pending_rows_;
  bool tracking_ = false;
  ChangedIds changed_;
  // Ids in memory whose record on disk is still there (Load leaves it), and the records of rows
  // evicted since the last Spill, which erases them.
  std::unordered_set<uint64_t> copies_, evicted_copies_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_TABLE_ROWS_H_
