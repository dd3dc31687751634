// JobProgress: the chief's progress lines become the job's bar; other lines pass through.
#include "launch/job_progress.h"

#include <gtest/gtest.h>

namespace towerps::launch {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

TEST(JobProgressTest, ProgressLinesMakeTheBarAndOtherLinesPassThrough) {
  JobProgress p(/*enabled=*/true, /*examples_per_step=*/128);
  EXPECT_EQ(p.BarText(steady_clock::now(), 200), "");
  EXPECT_FALSE(p.Consume("[worker:0] step 100, loss = 0.5"));
  EXPECT_FALSE(p.Consume("step 100 @progress {}"));
  const auto start = steady_clock::now();
  ASSERT_TRUE(p.Consume(R"(@progress {"step":100,"steps":1000,"steps_per_epoch":250,"loss":0.5})"));
  ASSERT_TRUE(p.Consume(
      R"(@progress {"step":300,"steps":1000,"steps_per_epoch":250,"loss":0.25,"accuracy":0.8125})"));
  // 200 steps of 128 examples in (about) 2 s: 12.8k examples/s, 700 steps left: 7 s.
  const std::string bar = p.BarText(start + milliseconds(2000), 200);
  EXPECT_EQ(bar.substr(0, 37), "epoch 2/4 [====>           ] 300/1000") << bar;
  EXPECT_NE(bar.find(" 12.8k ex/s ETA 0:07 loss 0.2500 acc 0.8125"), std::string::npos) << bar;
  // The last step of an epoch still belongs to it; the bar never outgrows the terminal.
  ASSERT_TRUE(p.Consume(R"(@progress {"step":250,"steps":1000,"steps_per_epoch":250,"loss":0.5})"));
  EXPECT_EQ(p.BarText(start + milliseconds(2000), 200).substr(0, 9), "epoch 1/4");
  EXPECT_EQ(p.BarText(start + milliseconds(2000), 30).size(), 29u);
  // A malformed progress line is consumed, and changes nothing.
  EXPECT_TRUE(p.Consume("@progress {not json"));
  EXPECT_TRUE(p.Consume(R"(@progress {"step":"x"})"));
  EXPECT_EQ(p.BarText(start + milliseconds(2000), 200).substr(0, 9), "epoch 1/4");
}

TEST(JobProgressTest, DisabledItConsumesNothing) {
  JobProgress p(/*enabled=*/false, 64);
  EXPECT_FALSE(p.Consume(R"(@progress {"step":1,"steps":10})"));
  EXPECT_EQ(p.BarText(steady_clock::now(), 200), "");
}

}  // namespace
}  // namespace towerps::launch
