// RocAuc (worker/train/roc_auc.h) against its definition: every positive-negative pair compared,
// ties counting half, on random scores with many ties; and the cases with a known answer.
#include "worker/train/roc_auc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace towerps::worker {
namespace {

double PairwiseAuc(const std::vector<double>& s, const std::vector<int32_t>& y) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[i] != 1 || y[j] != 0) continue;
      pairs += 1;
      wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
    }
  }
  return wins / pairs;
}

TEST(RocAucTest, MatchesEveryPairCompared) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const int n = 1 + trial * 37;
    std::vector<double> s(n);
    std::vector<int32_t> y(n);
    for (int i = 0; i < n; ++i) {
      s[i] = std::uniform_int_distribution<int>(0, 9)(rng) / 10.0;  // many ties
      y[i] = std::bernoulli_distribution(0.3)(rng);
    }
    y[0] = 1;
    if (n > 1) y[1] = 0;
    if (n == 1) continue;
    EXPECT_NEAR(RocAuc(s, y), PairwiseAuc(s, y), 1e-12) << n << " examples";
  }
}

TEST(RocAucTest, KnownAnswers) {
  EXPECT_DOUBLE_EQ(
      RocAuc(std::vector<double>{0.1, 0.4, 0.35, 0.8}, std::vector<int32_t>{0, 0, 1, 1}),
      0.75);  // the scikit-learn documentation's example
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<double>{0.2, 0.9}, std::vector<int32_t>{0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<double>{0.9, 0.2}, std::vector<int32_t>{0, 1}), 0.0);
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<double>(6, 0.5), std::vector<int32_t>{0, 1, 0, 1, 1, 0}),
                   0.5);  // a constant ranks nothing
  EXPECT_TRUE(std::isnan(RocAuc(std::vector<double>{0.1, 0.2}, std::vector<int32_t>{1, 1})));
  EXPECT_TRUE(
      std::isnan(RocAuc(std::vector<double>{0.1, std::nan("")}, std::vector<int32_t>{0, 1})));
}

}  // namespace
}  // namespace towerps::worker
