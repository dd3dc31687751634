// MergeRuns (common/merge_runs.h) against std::stable_sort, the definition: random runs of
// repeating keys, tagged with their run, at every run count from 0 to 9 (odd ones carried over),
// with empty runs among them.
#include "common/merge_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace towerps {
namespace {

TEST(MergeRunsTest, SortsAsAStableSortOfTheWholeVectorDoes) {
  using Item = std::pair<int, int>;  // (key, run)
  auto by_key = [](const Item& a, const Item& b) { return a.first < b.first; };
  std::mt19937 rng(7);
  std::vector<Item> scratch;
  for (int runs = 0; runs <= 9; ++runs) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<Item> items;
      std::vector<size_t> bounds = {0};
      for (int r = 0; r < runs; ++r) {
        std::vector<int> keys(rng() % 12);  // some runs empty
        for (int& k : keys) k = static_cast<int>(rng() % 10);
        std::sort(keys.begin(), keys.end());
        for (int k : keys) items.emplace_back(k, r);
        bounds.push_back(items.size());
      }
      std::vector<Item> expected = items;
      std::stable_sort(expected.begin(), expected.end(), by_key);
      MergeRuns(items, bounds, scratch, by_key);
      EXPECT_EQ(items, expected) << runs << " runs, trial " << trial;
      EXPECT_EQ(bounds.size(), runs == 0 ? 1u : 2u);
    }
  }
}

}  // namespace
}  // namespace towerps
