// CollapseWatch on loss sequences whose verdict is known: a model that learns, one that never
// leaves chance (a rate too small), one that blows up and stays up, and one that learned and
// fell back to a constant output, which alone is a collapse.
#include "worker/train/collapse.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace towerps::worker {
namespace {

const double kLn10 = std::log(10.0);

std::vector<int32_t> Balanced(int classes, int per_class) {
  std::vector<int32_t> labels;
  for (int i = 0; i < per_class; ++i)
    for (int c = 0; c < classes; ++c) labels.push_back(c);
  return labels;
}

TEST(ChanceLevelTest, BalancedClassesGuessLnCAndOneInC) {
  const ChanceLevel c = ChanceLevelOf(Balanced(10, 7), 10);
  EXPECT_DOUBLE_EQ(c.constant_loss, kLn10);
  EXPECT_DOUBLE_EQ(c.majority_share, 0.1);
  EXPECT_EQ(c.Describe(), "ln 10 = 2.3026");
}

TEST(ChanceLevelTest, UnbalancedClassesGuessTheirEntropy) {
  // 3 of class 0, 1 of class 1: the best constant guess (3/4, 1/4) scores their entropy.
  const ChanceLevel c = ChanceLevelOf({0, 0, 0, 1}, 2);
  EXPECT_DOUBLE_EQ(c.majority_share, 0.75);
  EXPECT_NEAR(c.constant_loss, -(0.75 * std::log(0.75) + 0.25 * std::log(0.25)), 1e-12);
  EXPECT_LT(c.constant_loss, std::log(2.0));
  EXPECT_NE(c.Describe().find("the entropy of the labels"), std::string::npos);
}

class CollapseWatchTest : public ::testing::Test {
 protected:
  CollapseWatch watch_{ChanceLevelOf(Balanced(10, 10), 10), ChanceLevelOf(Balanced(10, 10), 10),
                       /*window=*/50};
  std::mt19937 rng_{7};
  // A loss around `level` with per-batch noise of `spread`.
  double Around(double level, double spread) {
    return level + std::uniform_real_distribution<double>(-spread, spread)(rng_);
  }
};

TEST_F(CollapseWatchTest, ALearningModelIsNotACollapse) {
  for (int s = 1; s <= 400; ++s) {
    const double loss = Around(0.4 + 1.9 * std::exp(-s / 30.0), 0.15);
    EXPECT_FALSE(watch_.Step(s, loss).has_value()) << s;
  }
  EXPECT_FALSE(watch_.Evaluated(0.85, 0.42).has_value());
}

TEST_F(CollapseWatchTest, AModelThatNeverLeftChanceIsNotACollapse) {
  // A rate too small: the loss stays at ln 10 and the accuracy at 0.1, from the start.
  for (int s = 1; s <= 400; ++s) EXPECT_FALSE(watch_.Step(s, Around(kLn10 + 0.01, 0.004)));
  EXPECT_FALSE(watch_.left_chance());
  EXPECT_FALSE(watch_.Evaluated(0.1, 2.3034).has_value());
}

TEST_F(CollapseWatchTest, AModelThatLearnedAndFellBackToAConstantCollapsed) {
  int64_t found = -1;
  for (int s = 1; s <= 300 && found < 0; ++s) {
    // Learns for 100 steps, spikes, then outputs a constant: losses pinned at ln 10.
    const double loss = s <= 100 ? Around(0.8, 0.2) : s <= 110 ? 30.0 : Around(kLn10, 0.004);
    if (watch_.Step(s, loss)) found = s;
  }
  // Once the middle of the window (its median and quartiles) is pinned: after most of a window
  // of 50 steps at chance, at the latest when it all is (steps 111-160).
  EXPECT_GT(found, 135);
  EXPECT_LE(found, 160);
  const auto at_eval = watch_.Evaluated(0.1, 2.3034);
  ASSERT_TRUE(at_eval.has_value());
  EXPECT_EQ(*at_eval,
            "test accuracy 0.1000, test loss 2.3034, the loss of a constant guess (ln 10 = "
            "2.3026)");
  // Just below the constant guess's loss (within 1%) still counts; well below, or above chance
  // accuracy, does not.
  EXPECT_TRUE(watch_.Evaluated(0.1058, 2.2965).has_value());
  EXPECT_FALSE(watch_.Evaluated(0.1, 2.1).has_value());
  EXPECT_FALSE(watch_.Evaluated(0.15, 2.31).has_value());
}

// The run of issue 36's 32-worker async job: the loss blew up within the first steps (so where
// it "began" is already far above chance, and it never rose 3x above that), the test accuracy
// reached 0.154 at the first evaluation, then every output became constant. The evaluation
// above chance is what shows the model had left it; without it the watch stays silent.
TEST_F(CollapseWatchTest, AModelThatBlewUpAtOnceAndFellToAConstantIsCaughtByItsEvaluation) {
  CollapseWatch unevaluated = watch_;
  const auto loss_at = [&](int s) { return s <= 10 ? Around(12.0, 6.0) : Around(kLn10, 0.002); };
  int64_t found = -1, found_unevaluated = -1;
  for (int s = 1; s <= 200; ++s) {
    const double loss = loss_at(s);
    if (s == 8) {
      EXPECT_FALSE(watch_.Evaluated(0.154, 3.917).has_value());
    }
    if (found < 0 && watch_.Step(s, loss)) found = s;
    if (found_unevaluated < 0 && unevaluated.Step(s, loss)) found_unevaluated = s;
  }
  EXPECT_GT(found, 40);
  EXPECT_LE(found, 60);
  EXPECT_EQ(found_unevaluated, -1);
  EXPECT_TRUE(watch_.Evaluated(0.1, 2.30696).has_value());
}

// Test labels that are noise: the test set scores at chance or worse while the training loss
// falls to nothing. Overfitting, not a collapse.
TEST_F(CollapseWatchTest, AModelThatFitsItsTrainingDataHasNotCollapsed) {
  for (int s = 1; s <= 200; ++s)
    EXPECT_FALSE(watch_.Step(s, Around(2.3 * std::exp(-s / 20.0), 0.01)));
  EXPECT_TRUE(watch_.left_chance());
  EXPECT_FALSE(watch_.Evaluated(0.0375, 2.83).has_value());
}

TEST_F(CollapseWatchTest, ALossThatStaysHighButSpreadIsNotACollapse) {
  // Left chance upwards and wanders around 2.3 with a learning model's spread: not pinned.
  for (int s = 1; s <= 20; ++s) watch_.Step(s, 6.0);
  for (int s = 21; s <= 300; ++s) EXPECT_FALSE(watch_.Step(s, Around(kLn10, 0.5))) << s;
}

// A click model: 20% positives, judged by its AUC and its outputs' spread, not its log loss.
class BinaryCollapseTest : public ::testing::Test {
 protected:
  static std::vector<int32_t> Clicks() {
    std::vector<int32_t> y(1000, 0);
    std::fill(y.begin(), y.begin() + 200, 1);
    return y;
  }
  CollapseWatch watch_{ChanceLevelOf(Clicks(), 2), ChanceLevelOf(Clicks(), 2), /*window=*/20};
  const double constant_ = ChanceLevelOf(Clicks(), 2).constant_loss;  // 0.5004
};

TEST_F(BinaryCollapseTest, AWeakButRankingModelIsNotCalledCollapsedWhateverItsLogLoss) {
  for (int s = 1; s <= 100; ++s) EXPECT_FALSE(watch_.Step(s, constant_ * (s % 2 ? 0.8 : 1.2)));
  // The majority class's accuracy and a log loss above a constant guess's, but AUC 0.63.
  EXPECT_FALSE(watch_.Evaluated(0.7996, constant_ * 1.02, 0.63, 0.05).has_value());
  EXPECT_TRUE(watch_.left_chance());
  EXPECT_EQ(watch_.LeftChance(), true);
}

TEST_F(BinaryCollapseTest, RankingThatFellBackToAConstantOutputCollapsed) {
  for (int s = 1; s <= 40; ++s) watch_.Step(s, constant_ * (s % 2 ? 0.8 : 1.2));
  EXPECT_FALSE(watch_.Evaluated(0.80, 0.45, 0.70, 0.08).has_value());
  // AUC back at chance, but the outputs still spread: a bad model, not a constant one.
  EXPECT_FALSE(watch_.Evaluated(0.80, 0.52, 0.505, 0.02).has_value());
  const auto what = watch_.Evaluated(0.80, 0.50, 0.5, 0.0);
  ASSERT_TRUE(what.has_value());
  EXPECT_NE(what->find("test AUC 0.5000 with every output the same"), std::string::npos) << *what;
}

TEST_F(BinaryCollapseTest, ShuffledLabelsNeverLeaveChanceAndAreReportedAsNotLearning) {
  // Tables can memorise the training batches (a loss far below the constant guess's), but the
  // test AUC stays at 0.5: judged by the AUC, it never left chance.
  for (int s = 1; s <= 100; ++s) EXPECT_FALSE(watch_.Step(s, constant_ * 0.5));
  EXPECT_FALSE(watch_.Evaluated(0.80, 0.60, 0.501, 0.03).has_value());
  EXPECT_EQ(watch_.LeftChance(), false);
  EXPECT_EQ(watch_.NotLearning(), "test AUC 0.5010 (chance is 0.5)");
}

TEST(CollapseWatchNoClassesTest, LabelsWithoutClassesAreNeverAtChance) {
  CollapseWatch watch(ChanceLevelOf({}, 0), ChanceLevelOf({}, 0), 4);
  for (int s = 1; s <= 50; ++s) EXPECT_FALSE(watch.Step(s, s < 10 ? 0.1 : 1.0));
  EXPECT_FALSE(watch.Evaluated(0, 100).has_value());
}

}  // namespace
}  // namespace towerps::worker
