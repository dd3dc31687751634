#include "ps/server/row_store.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "common/splitmix.h"
#include "towerps/check.h"

namespace towerps::ps {

namespace {

// log2 of the rows a block holds: at least 4096, and at least a huge page of floats.
int BlockShift(int64_t stride) {
  int shift = 12;
  while ((int64_t{1} << shift) * stride * static_cast<int64_t>(sizeof(float)) <
         static_cast<int64_t>(kHugePageBytes)) {
    ++shift;
  }
  return shift;
}

}  // namespace

RowStore::RowStore(int64_t stride)
    : stride_(stride), block_shift_(BlockShift(std::max<int64_t>(stride, 1))), slots_(16) {
  TOWERPS_CHECK(stride >= 1) << "row stride " << stride;
}

size_t RowStore::Home(uint64_t id) const {
  // A different hash from the servers' partitioning (TablePartitionOf salts its input), so the
  // ids of one partition do not share low bits here.
  return static_cast<size_t>(SplitMix64Finalize(id)) & (slots_.size() - 1);
}

int64_t RowStore::Find(uint64_t id) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = Home(id);; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.row_plus_one == 0) return -1;
    if (s.id == id) return static_cast<int64_t>(s.row_plus_one) - 1;
  }
}

void RowStore::FindAll(const uint64_t* ids, int64_t n, int64_t* rows) const {
  constexpr int64_t kAhead = 16;
  for (int64_t i = 0; i < std::min(n, kAhead); ++i) Prefetch(ids[i]);
  for (int64_t i = 0; i < n; ++i) {
    if (i + kAhead < n) Prefetch(ids[i + kAhead]);
    rows[i] = Find(ids[i]);
  }
}

int64_t RowStore::Insert(uint64_t id, bool* added) {
  if (static_cast<size_t>(size() + 1) * 2 > slots_.size()) Grow();
  const size_t mask = slots_.size() - 1;
  size_t i = Home(id);
  for (; slots_[i].row_plus_one != 0; i = (i + 1) & mask) {
    if (slots_[i].id == id) {
      *added = false;
      return static_cast<int64_t>(slots_[i].row_plus_one) - 1;
    }
  }
  const int64_t r = size();
  TOWERPS_CHECK(r < std::numeric_limits<uint32_t>::max()) << "a table partition of 2^32 rows";
  if (Block(r) == blocks_.size()) {
    const Release release{static_cast<size_t>(block_rows() * stride_) * sizeof(float),
                          /*huge=*/!blocks_.empty()};
    std::unique_ptr<float[], Release> block(
        static_cast<float*>(AllocateArray(release.bytes, release.huge)), release);
    blocks_.push_back(std::move(block));  // made first: a throwing push_back frees it
  }
  slots_[i] = {id, static_cast<uint32_t>(r + 1)};
  ids_.push_back(id);
  updates_.push_back(0);
  last_update_.push_back(0);
  *added = true;
  return r;
}

void RowStore::CountUpdate(int64_t r) {
  uint32_t& n = updates_[static_cast<size_t>(r)];
  if (n != std::numeric_limits<uint32_t>::max()) ++n;
}

void RowStore::Remove(int64_t r) {
  TOWERPS_CHECK(r >= 0 && r < size()) << "row " << r << " of " << size();
  const size_t mask = slots_.size() - 1;
  size_t hole = Home(ids_[static_cast<size_t>(r)]);
  while (slots_[hole].id != ids_[static_cast<size_t>(r)] || slots_[hole].row_plus_one == 0) {
    hole = (hole + 1) & mask;
  }
  // Backward-shift deletion: each later slot of the probe chain that may sit at the hole (its
  // home is not cyclically in (hole, slot]) moves there, and its slot becomes the hole.
  for (size_t i = (hole + 1) & mask; slots_[i].row_plus_one != 0; i = (i + 1) & mask) {
    const size_t home = Home(slots_[i].id);
    const bool stays = hole <= i ? (hole < home && home <= i) : (hole < home || home <= i);
    if (stays) continue;
    slots_[hole] = slots_[i];
    hole = i;
  }
  slots_[hole] = Slot{};
  const int64_t last = size() - 1;
  if (r != last) {  // the last row moves into r, and its slot follows it
    const uint64_t moved = ids_[static_cast<size_t>(last)];
    size_t i = Home(moved);
    while (slots_[i].id != moved || slots_[i].row_plus_one == 0) i = (i + 1) & mask;
    slots_[i].row_plus_one = static_cast<uint32_t>(r + 1);
    std::copy_n(row(last), stride_, row(r));
    ids_[static_cast<size_t>(r)] = moved;
    updates_[static_cast<size_t>(r)] = updates_[static_cast<size_t>(last)];
    last_update_[static_cast<size_t>(r)] = last_update_[static_cast<size_t>(last)];
  }
  ids_.pop_back();
  updates_.pop_back();
  last_update_.pop_back();
  // A block goes back once two lie empty past the rows: one spare is kept, so rows that come
  // and go across a block's edge do not allocate and free it every step.
  if (blocks_.size() > Block(last) + 2) blocks_.pop_back();
}

void RowStore::Grow() {
  Array<Slot> old(slots_.size() * 2);
  old.swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.row_plus_one == 0) continue;
    size_t i = Home(s.id);
    while (slots_[i].row_plus_one != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

size_t RowStore::bytes() const {
  return slots_.size() * sizeof(Slot) +
         blocks_.size() * static_cast<size_t>(block_rows() * stride_) * sizeof(float) +
         ids_.capacity() * sizeof(uint64_t) + updates_.capacity() * sizeof(uint32_t) +
         last_update_.capacity() * sizeof(int64_t);
}

void RowStore::Clear() {
  slots_.assign(16, Slot{});
  blocks_.clear();
  ids_.clear();
  ids_.shrink_to_fit();
  updates_.clear();
  updates_.shrink_to_fit();
  last_update_.clear();
  last_update_.shrink_to_fit();
}

}  // namespace towerps::ps
