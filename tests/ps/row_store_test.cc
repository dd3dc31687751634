// RowStore (ps/server/row_store.h): ids to rows through its hash map, rows that keep their place
// until a removal, removals against a reference map, and memory that grows with the rows held.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>
#include <unordered_map>

#include "ps/server/row_store.h"

namespace towerps::ps {
namespace {

TEST(RowStoreTest, FindsEveryIdItHoldsAndNoOther) {
  RowStore store(2);
  bool added = false;
  const uint64_t edge[] = {0, 1, std::numeric_limits<uint64_t>::max(), 1ull << 63};
  for (uint64_t id : edge) {
    const int64_t r = store.Insert(id, &added);
    EXPECT_TRUE(added);
    store.row(r)[0] = static_cast<float>(r);
  }
  for (uint64_t id : edge) EXPECT_GE(store.Find(id), 0) << id;
  EXPECT_EQ(store.Find(2), -1);
  EXPECT_EQ(store.Insert(1, &added), 1);
  EXPECT_FALSE(added);
  EXPECT_EQ(store.size(), 4);
  EXPECT_EQ(store.id(2), std::numeric_limits<uint64_t>::max());
}

// 200,000 random ids through many rehashes: every row still holds what was written to it when
// it was added, found by its id.
TEST(RowStoreTest, RowsKeepTheirPlaceAndValuesThroughGrowth) {
  RowStore store(3);
  std::mt19937_64 rng(5);
  std::unordered_map<uint64_t, int64_t> expected;
  while (expected.size() < 200000) {
    const uint64_t id = rng();
    bool added = false;
    const int64_t r = store.Insert(id, &added);
    if (!added) continue;
    for (int j = 0; j < 3; ++j) store.row(r)[j] = static_cast<float>(id % 1000 + j);
    expected[id] = r;
  }
  for (const auto& [id, r] : expected) {
    ASSERT_EQ(store.Find(id), r);
    EXPECT_EQ(store.row(r)[2], static_cast<float>(id % 1000 + 2));
    EXPECT_EQ(store.id(r), id);
  }
  for (int i = 0; i < 1000; ++i) {
    const uint64_t id = rng();
    if (expected.count(id) == 0) {
      EXPECT_EQ(store.Find(id), -1);
    }
  }
}

TEST(RowStoreTest, MemoryGrowsWithTheRowsHeld) {
  RowStore store(32);
  const size_t empty = store.bytes();
  bool added = false;
  for (uint64_t id = 0; id < 10000; ++id) store.Insert(id * 1000003, &added);
  const size_t ten_thousand = store.bytes();
  for (uint64_t id = 10000; id < 20000; ++id) store.Insert(id * 1000003, &added);
  const size_t twenty_thousand = store.bytes();
  // 128 bytes of floats a row, plus the map and the id and count arrays: under 200 a row.
  EXPECT_GT(ten_thousand - empty, 10000u * 128);
  EXPECT_LT(twenty_thousand,
            20000u * 200 + empty + 2 * static_cast<size_t>(store.block_rows()) * 128);
  store.CountUpdate(0);
  EXPECT_EQ(store.updates(0), 1u);
  store.set_updates(0, std::numeric_limits<uint32_t>::max());
  store.CountUpdate(0);
  EXPECT_EQ(store.updates(0), std::numeric_limits<uint32_t>::max()) << "saturates";
  store.Clear();
  EXPECT_EQ(store.size(), 0);
  EXPECT_EQ(store.Find(0), -1);
}

// Random inserts and removals (many ids sharing probe chains in a small map) against a
// std::map: after every change each held id is found, with its floats, count and last update,
// and every removed id is not; the rows stay [0, size()).
TEST(RowStoreTest, RemovalsKeepEveryOtherRowFoundWithItsValues) {
  RowStore store(2);
  std::mt19937_64 rng(11);
  std::map<uint64_t, float> expected;  // id -> its first float
  auto check = [&] {
    ASSERT_EQ(store.size(), static_cast<int64_t>(expected.size()));
    for (const auto& [id, v] : expected) {
      const int64_t r = store.Find(id);
      ASSERT_GE(r, 0) << id;
      ASSERT_EQ(store.id(r), id);
      ASSERT_EQ(store.row(r)[0], v);
      ASSERT_EQ(store.row(r)[1], -v);
      ASSERT_EQ(store.updates(r), static_cast<uint32_t>(v));
      ASSERT_EQ(store.last_update(r), static_cast<int64_t>(v) * 3);
    }
  };
  for (int round = 0; round < 4000; ++round) {
    const uint64_t id = rng() % 600;  // dense ids: long probe chains, wrapping the map's end
    const int64_t r = store.Find(id);
    if (r >= 0 && rng() % 3 != 0) {
      store.Remove(r);
      expected.erase(id);
      ASSERT_EQ(store.Find(id), -1) << id;
    } else if (r < 0) {
      bool added = false;
      const int64_t at = store.Insert(id, &added);
      ASSERT_TRUE(added);
      const auto v = static_cast<float>(round);
      store.row(at)[0] = v;
      store.row(at)[1] = -v;
      store.set_updates(at, static_cast<uint32_t>(round));
      store.set_last_update(at, int64_t{round} * 3);
      expected[id] = v;
    }
    if (round % 97 == 0) check();
  }
  check();
  // Emptied and filled again: blocks are taken back and reused.
  while (store.size() > 0) store.Remove(store.size() / 2);
  EXPECT_EQ(store.Find(expected.begin()->first), -1);
  bool added = false;
  EXPECT_EQ(store.Insert(7, &added), 0);
  EXPECT_TRUE(added);
  EXPECT_EQ(store.last_update(0), 0);

  // Across blocks: two and a half blocks of rows (three blocks, the later two on huge pages where
  // the system grants them) down to 100, whose values moved with them, and the blocks past one
  // spare given back.
  RowStore big(2);
  const auto n = static_cast<uint64_t>(big.block_rows() * 5 / 2);
  for (uint64_t id = 0; id < n; ++id) {
    big.row(big.Insert(id * 3, &added))[0] = static_cast<float>(id);
  }
  const size_t full = big.bytes();
  for (uint64_t id = 0; id < n - 100; ++id) big.Remove(big.Find(id * 3));
  EXPECT_EQ(big.size(), 100);
  EXPECT_LE(big.bytes() + static_cast<size_t>(big.block_rows()) * 2 * sizeof(float), full);
  for (uint64_t id = n - 100; id < n; ++id) {
    ASSERT_EQ(big.row(big.Find(id * 3))[0], static_cast<float>(id)) << id;
  }
}

}  // namespace
}  // namespace towerps::ps
