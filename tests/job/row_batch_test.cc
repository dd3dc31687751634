// UniqueIds (job/row_batch.h): a batch's ids once each, grouped by partition and increasing in
// each, the inverse index, sums of repeated ids in the batch's order, and the gather back.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <tuple>

#include "job/placement.h"
#include "job/row_batch.h"

namespace towerps::ps {
namespace {

TEST(RowBatchTest, DeduplicatesGroupedByPartitionAndIncreasingInEach) {
  std::mt19937_64 rng(3);
  std::vector<uint64_t> ids(1000);
  for (auto& id : ids) id = rng() % 300;
  const UniqueIds u = Deduplicate(ids, 3);
  ASSERT_EQ(u.inverse.size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(u.ids.u64()[u.inverse[i]], ids[i]);
  std::set<uint64_t> distinct(ids.begin(), ids.end());
  ASSERT_EQ(static_cast<size_t>(u.size()), distinct.size());
  for (int64_t k = 1; k < u.size(); ++k) {
    const uint64_t a = u.ids.u64()[k - 1], b = u.ids.u64()[k];
    const int pa = TablePartitionOf(a, 3), pb = TablePartitionOf(b, 3);
    EXPECT_TRUE(pa < pb || (pa == pb && a < b)) << k;
  }
  EXPECT_EQ(Deduplicate({}, 2).size(), 0);
}

// The same ids and inverse as sorting every (partition, id, position) of the batch, the
// definition, at small and large sizes, with ids that share their low bits, their high bits or
// are all one id (the radix sort's skipped bytes), and partitions numbered past one byte.
TEST(RowBatchTest, DeduplicatesAsSortingTheWholeBatchDoes) {
  std::mt19937_64 rng(11);
  const auto reference = [](const std::vector<uint64_t>& ids, int partitions) {
    std::vector<std::tuple<int, uint64_t>> sorted;
    for (uint64_t id : ids) sorted.emplace_back(TablePartitionOf(id, partitions), id);
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    std::vector<uint64_t> unique;
    for (const auto& [p, id] : sorted) unique.push_back(id);
    return unique;
  };
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{7}, size_t{8}, size_t{9}, size_t{127},
                   size_t{128}, size_t{129}, size_t{5000}}) {
    for (int kind = 0; kind < 5; ++kind) {
      std::vector<uint64_t> ids(n);
      for (auto& id : ids) {
        const uint64_t r = rng();
        id = kind == 0   ? r                         // all distinct
             : kind == 1 ? r % 13                    // a dozen values
             : kind == 2 ? (r % 64) << 40            // the same low bits
             : kind == 3 ? (r % 64) | (~0ull << 32)  // the same high bits
                         : 42;                       // one id
      }
      for (int partitions : {1, 3, 300}) {
        const UniqueIds u = Deduplicate(ids, partitions);
        const std::vector<uint64_t> want = reference(ids, partitions);
        ASSERT_EQ(u.size(), static_cast<int64_t>(want.size())) << n << " " << kind;
        for (size_t k = 0; k < want.size(); ++k) ASSERT_EQ(u.ids.u64()[k], want[k]) << k;
        ASSERT_EQ(u.inverse.size(), n);
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(u.ids.u64()[u.inverse[i]], ids[i]) << i;
      }
    }
  }
}

TEST(RowBatchTest, SumsRepeatedIdsInBatchOrderAndGathersThemBack) {
  const std::vector<uint64_t> ids = {8, 3, 8, 8, 5};
  const UniqueIds u = Deduplicate(ids, 1);
  ASSERT_EQ(u.size(), 3);
  const float grads[] = {1e8f, 1, 2, 20, 3, 30, -1e8f, 0.5f, 7, 70};  // dim 2
  float sums[6];
  SumRowsById(u, grads, 2, sums);
  const uint32_t eight = u.inverse[0];
  // ((1e8 + 3) + -1e8) in float is 0: the batch's order, not a sorted one.
  EXPECT_EQ(sums[eight * 2], (1e8f + 3.0f) + -1e8f);
  EXPECT_EQ(sums[eight * 2 + 1], (1.0f + 30.0f) + 0.5f);
  EXPECT_EQ(sums[u.inverse[1] * 2], 2.0f);
  float rows[6] = {0, 1, 10, 11, 20, 21};
  float gathered[10];
  GatherRows(u, rows, 2, gathered);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(gathered[i * 2 + 1], rows[u.inverse[i] * 2 + 1]);
  }
}

TEST(RowBatchTest, SumsRowsAtAnyNumberingAsByIdAndRefusesAnIndexOutside) {
  const std::vector<uint64_t> ids = {8, 3, 8, 8, 5};
  const UniqueIds u = Deduplicate(ids, 1);
  const float grads[] = {1e8f, 1, 2, 20, 3, 30, -1e8f, 0.5f, 7, 70};  // dim 2
  const std::vector<int64_t> inverse(u.inverse.begin(), u.inverse.end());
  float by_id[6], at[6];
  SumRowsById(u, grads, 2, by_id);
  ASSERT_TRUE(SumRowsAt(inverse, grads, 2, 3, at).ok());
  for (int k = 0; k < 6; ++k) EXPECT_EQ(at[k], by_id[k]) << k;
  // A row no index names sums nothing: zero.
  float wider[8];
  ASSERT_TRUE(SumRowsAt(inverse, grads, 2, 4, wider).ok());
  for (int k = 0; k < 6; ++k) EXPECT_EQ(wider[k], by_id[k]) << k;
  EXPECT_EQ(wider[6], 0.0f);
  EXPECT_EQ(wider[7], 0.0f);
  const std::vector<int64_t> outside = {0, 2, 3};
  const Status refused = SumRowsAt(outside, grads, 2, 3, at);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "index 3 at 2 is outside the 3 rows");
}

}  // namespace
}  // namespace towerps::ps
