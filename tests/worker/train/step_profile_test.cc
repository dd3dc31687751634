// StepProfile (worker/train/step_profile.h): the medians and the critical path from known times.
#include "worker/train/step_profile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace towerps::worker {
namespace {

using Clock = StepProfile::Clock;
using Event = StepProfile::Event;
using std::chrono::microseconds;

// Two variables: "late" is pushed first (its gradient comes first in backward) but its values
// arrive last, so the critical path goes through it.
TEST(StepProfileTest, MediansAndTheCriticalPathFromKnownTimes) {
  StepProfile profile(3, {"first", "late"}, {400, 800});
  for (int step = 0; step < 5; ++step) {
    profile.BeginStep();
    const Clock::time_point t0 = Clock::now();
    const auto at = [&](int us) { return t0 + microseconds(us); };
    profile.Mark(1, Event::kGradient, at(1000));
    profile.Mark(1, Event::kSent, at(1100));
    profile.Mark(0, Event::kGradient, at(2000));
    profile.Mark(0, Event::kSent, at(2050));
    profile.Mark(0, Event::kSent, at(9000));  // the first mark wins
    profile.Mark(0, Event::kAnswered, at(2500));
    profile.Mark(0, Event::kArrived, at(2600));
    profile.Mark(1, Event::kAnswered, at(3000 + 100 * step));
    profile.Mark(1, Event::kArrived, at(3100 + 100 * step));
    profile.Mark(7, Event::kSent, at(1));  // no such variable: ignored
    std::this_thread::sleep_for(microseconds(200));
    profile.EndCompute();
    std::this_thread::sleep_for(microseconds(200));
    profile.EndStep();
  }
  EXPECT_FALSE(profile.recording());  // 3 steps asked
  const std::optional<ProfileReport> r = profile.Report();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->steps, 3);
  ASSERT_EQ(r->variables.size(), 2u);
  // Marks are relative to BeginStep's clock read, a little before t0: allow for it.
  const double slack = 1.0;  // ms
  EXPECT_NEAR(r->variables[1].gradient_ms, 1.0, slack);
  EXPECT_NEAR(r->variables[0].sent_ms, 2.05, slack);
  EXPECT_NEAR(r->variables[1].arrived_ms, 3.2, slack);  // the median of 3.1, 3.2, 3.3
  EXPECT_LT(r->variables[0].loaded_ms, 0);              // never loaded: -1
  EXPECT_EQ(r->variables[1].bytes, 800);
  EXPECT_NEAR(r->first_push_ms, 1.1, slack);
  EXPECT_EQ(r->critical_variable, "late");
  EXPECT_NEAR(r->to_push_ms, 0.1, 0.01);  // differences of marks: exact up to the clock
  EXPECT_NEAR(r->round_trip_ms, 2.1, 0.11);
  EXPECT_GE(r->step_ms, r->compute_ms);
  EXPECT_NE(r->Describe().find("critical path through 'late'"), std::string::npos) << r->Describe();
}

TEST(StepProfileTest, NothingIsRecordedOutsideAStepOrWhenOff) {
  StepProfile off(0, {"v"}, {4});
  off.BeginStep();
  off.Mark(0, Event::kSent);
  off.EndStep();
  EXPECT_FALSE(off.Report().has_value());
  StepProfile on(2, {"v"}, {4});
  on.Mark(0, Event::kSent);  // before any step
  EXPECT_FALSE(on.Report().has_value());
}

}  // namespace
}  // namespace towerps::worker
