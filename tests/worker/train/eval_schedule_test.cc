#include "worker/train/eval_schedule.h"

#include <gtest/gtest.h>

#include <vector>

namespace towerps::worker {
namespace {

// The steps at which a schedule fires when progress goes 1, 2, ..., last.
std::vector<int64_t> Fired(EvalSchedule s, int64_t from, int64_t last) {
  std::vector<int64_t> out;
  for (int64_t p = from; p <= last; ++p) {
    if (s.Due(p)) out.push_back(p);
  }
  return out;
}

TEST(EvalScheduleTest, OncePerEpochAtItsEnd) {
  EXPECT_EQ(Fired(EvalSchedule(117, 1, 0), 0, 351), (std::vector<int64_t>{117, 234, 351}));
  EXPECT_TRUE(EvalSchedule(117, 1, 0).EndsEpoch(234));
  EXPECT_FALSE(EvalSchedule(117, 1, 0).EndsEpoch(233));
}

TEST(EvalScheduleTest, KPointsPerEpochTheLastAtItsEnd) {
  // ceil(j x 117 / 4): 29.25 -> 30, 58.5 -> 59, 87.75 -> 88, 117.
  EXPECT_EQ(Fired(EvalSchedule(117, 4, 0), 0, 234),
            (std::vector<int64_t>{30, 59, 88, 117, 147, 176, 205, 234}));
}

TEST(EvalScheduleTest, ResumingSkipsThePointsAlreadyPassed) {
  EXPECT_EQ(Fired(EvalSchedule(117, 4, 59), 59, 117), (std::vector<int64_t>{88, 117}));
  EXPECT_EQ(Fired(EvalSchedule(117, 1, 117), 117, 234), (std::vector<int64_t>{234}));
}

TEST(EvalScheduleTest, SeveralPointsPassedAtOnceFireOnce) {
  EvalSchedule s(117, 4, 0);
  EXPECT_TRUE(s.Due(200));  // 30, 59, 88, 117, 147, 176 all passed
  EXPECT_FALSE(s.Due(204));
  EXPECT_TRUE(s.Due(205));
}

TEST(EvalScheduleTest, MorePointsThanStepsFireEveryStep) {
  EXPECT_EQ(Fired(EvalSchedule(3, 1000, 0), 0, 6), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

}  // namespace
}  // namespace towerps::worker
