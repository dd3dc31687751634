// RowStore: the rows one table partition holds (ps/server/table_chunk.h), by 64-bit id.
//
// An open-addressing hash map (linear probing, at most half full) takes an id to a row index;
// rows live in blocks of block_rows() rows (a power of two, at least 4096, and 2 MiB of floats or
// more), each row `stride` floats (its values, then its optimizer state), with the row's id,
// update count and last update's version in arrays beside them. Every block but the first, and
// the map and arrays once they reach 2 MiB, are on huge pages where the system grants them
// (common/huge_pages.h): rows are read at random, and a page walk per row cost as much as the rest
// of an update. The first block comes from operator new, on small pages, so that a small table's
// rows take memory as they are written (bytes() counts its whole block all the same). Rows are [0,
// size()): Remove moves the last row into the removed one's place (and deletes from the map by
// shifting the probe chain back, so no tombstones are left), so removals keep the rows dense and
// the same calls always give the same layout. Memory grows with the rows held, a block at a time,
// never with a table's bound; blocks go back as rows go (one spare kept), the map keeps its size.
//
// Contract: owned and used by one thread (the shard's); not thread-safe. A row index and its
// pointers stay valid until a Remove or Clear.
#ifndef TOWERPS_PS_SERVER_ROW_STORE_H_
#define TOWERPS_PS_SERVER_ROW_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/huge_pages.h"
#include "common/prefetch.h"

namespace towerps::ps {

class RowStore {
 public:
  explicit RowStore(int64_t stride);
  RowStore(const RowStore&) = delete;
  RowStore& operator=(const RowStore&) = delete;

  int64_t size() const { return static_cast<int64_t>(ids_.size()); }
  int64_t stride() const { return stride_; }
  int64_t block_rows() const { return int64_t{1} << block_shift_; }
  // The index of `id`'s row, or -1 when there is none.
  int64_t Find(uint64_t id) const;
  // Find for n ids at once, into rows[0, n): the map's slots are prefetched a few ids ahead, so
  // the cache misses of a batch overlap instead of following one another.
  void FindAll(const uint64_t* ids, int64_t n, int64_t* rows) const;
  // Brings the map's slot of `id` towards the cache, for an Insert or Find of it soon after.
  void Prefetch(uint64_t id) const { __builtin_prefetch(&slots_[Home(id)]); }
  void PrefetchRow(int64_t r) const { PrefetchFloats(row(r), stride_); }
  // The index of `id`'s row, added (its floats uninitialised, its update count 0) when absent;
  // `*added` says which.
  int64_t Insert(uint64_t id, bool* added);

  float* row(int64_t r) { return blocks_[Block(r)].get() + Offset(r); }
  const float* row(int64_t r) const { return blocks_[Block(r)].get() + Offset(r); }
  uint64_t id(int64_t r) const { return ids_[static_cast<size_t>(r)]; }
  uint32_t updates(int64_t r) const { return updates_[static_cast<size_t>(r)]; }
  // Counts one more update of row r (saturating: a row's count never wraps to 0).
  void CountUpdate(int64_t r);
  void set_updates(int64_t r, uint32_t n) { updates_[static_cast<size_t>(r)] = n; }
  // The version of row r's last update (0 until set): what TTL and LRU eviction read.
  int64_t last_update(int64_t r) const { return last_update_[static_cast<size_t>(r)]; }
  void set_last_update(int64_t r, int64_t v) { last_update_[static_cast<size_t>(r)] = v; }
  // Removes row r: the last row takes its index (its id, floats and counts move with it).
  void Remove(int64_t r);

  // Memory held: the map, the blocks and the per-row arrays.
  size_t bytes() const;
  void Clear();

 private:
  struct Slot {
    uint64_t id = 0;
    uint32_t row_plus_one = 0;  // 0: empty
  };
  size_t Block(int64_t r) const { return static_cast<size_t>(r >> block_shift_); }
  size_t Offset(int64_t r) const { return static_cast<size_t>((r & (block_rows() - 1)) * stride_); }
  size_t Home(uint64_t id) const;
  void Grow();

  template <typename T>
  using Array = std::vector<T, HugePageAllocator<T>>;
  struct Release {  // a block's, as AllocateArray gave it
    size_t bytes;
    bool huge;
    void operator()(float* p) const { ReleaseArray(p, bytes, huge); }
  };

  const int64_t stride_;
  const int block_shift_;
  Array<Slot> slots_;  // a power of two, at most half full
  std::vector<std::unique_ptr<float[], Release>> blocks_;
  Array<uint64_t> ids_;
  Array<uint32_t> updates_;
  Array<int64_t> last_update_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_ROW_STORE_H_
