#include "worker/straggler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/testing/status_assert.h"

namespace towerps::worker {
namespace {

TEST(StragglerPlanTest, FixedDelayHitsOnlyItsRank) {
  auto p = StragglerPlan::Parse("2:40ms", "", "", 4);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (int64_t step = 0; step < 10; ++step) {
    EXPECT_DOUBLE_EQ(p->DelaySeconds(2, step, 1, 0.01), 0.040);
    EXPECT_DOUBLE_EQ(p->DelaySeconds(1, step, 1, 0.01), 0.0);
  }
}

TEST(StragglerPlanTest, DistributionsHaveTheRequestedMoments) {
  auto exp = StragglerPlan::Parse("", "exp:20ms", "", 2);
  auto uni = StragglerPlan::Parse("", "uniform:10ms:30ms", "", 2);
  ASSERT_TRUE(exp.ok() && uni.ok());
  const int n = 20000;
  double se = 0, su = 0, lo = 1, hi = 0;
  for (int64_t step = 0; step < n; ++step) {
    se += exp->DelaySeconds(0, step, 7, 0);
    const double u = uni->DelaySeconds(1, step, 7, 0);
    su += u;
    lo = std::min(lo, u);
    hi = std::max(hi, u);
  }
  EXPECT_NEAR(se / n, 0.020, 0.020 * 0.04);  // ~5 standard errors
  EXPECT_NEAR(su / n, 0.020, 0.0005);
  EXPECT_GE(lo, 0.010);
  EXPECT_LE(hi, 0.030);
}

TEST(StragglerPlanTest, RandomDelaysAreReproducibleAndDifferPerWorker) {
  auto p = StragglerPlan::Parse("", "exp:5ms", "", 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->DelaySeconds(1, 17, 3, 0), p->DelaySeconds(1, 17, 3, 0));
  EXPECT_NE(p->DelaySeconds(1, 17, 3, 0), p->DelaySeconds(2, 17, 3, 0));
  EXPECT_NE(p->DelaySeconds(1, 17, 3, 0), p->DelaySeconds(1, 17, 4, 0));
}

TEST(StragglerPlanTest, SlowWorkersAreTheLastRanksAndScaleTheirComputeTime) {
  auto p = StragglerPlan::Parse("", "", "2:3", 5);
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->DelaySeconds(2, 0, 1, 0.1), 0.0);
  EXPECT_NEAR(p->DelaySeconds(3, 0, 1, 0.1), 0.2, 1e-12);  // 3x slower: 2 extra compute times
  EXPECT_NEAR(p->DelaySeconds(4, 0, 1, 0.1), 0.2, 1e-12);
}

TEST(StragglerPlanTest, BadValuesNameTheFlag) {
  struct Case {
    std::string straggler, dist, slow, expect;
  };
  for (const Case& c :
       {Case{"1", "", "", "--straggler=1"}, Case{"7:40ms", "", "", "rank 7"},
        Case{"1:40parsecs", "", "", "--straggler delay"},
        Case{"", "gauss:3ms", "", "--straggler-dist=gauss:3ms"},
        Case{"", "uniform:30ms:10ms", "", "HI is below LO"},
        Case{"", "", "9:2", "--slow-workers=9:2"},
        Case{"", "", "1:0.5", "FACTOR between 1 and 1000"},
        // Found by tests/fuzz/straggler_fuzzer: delays no sleep can take (sleep_for's
        // conversion to an integer count is undefined behaviour past 2^63).
        Case{"1:1e308", "", "", "--straggler delay: '1e308' is over an hour"},
        Case{"1:3601s", "", "", "is over an hour (3600 s)"},
        Case{"", "exp:1e300ms", "", "--straggler-dist mean: '1e300ms' is over an hour"},
        Case{"", "uniform:0:4e6", "", "--straggler-dist high: '4e6' is over an hour"},
        Case{"", "", "1:1e300", "FACTOR between 1 and 1000"}}) {
    auto p = StragglerPlan::Parse(c.straggler, c.dist, c.slow, 4);
    ASSERT_FALSE(p.ok()) << c.expect;
    EXPECT_NE(p.status().message().find(c.expect), std::string::npos) << p.status().message();
  }
  ASSERT_OK_AND_ASSIGN(const StragglerPlan none, StragglerPlan::Parse("", "", "", 4));
  EXPECT_TRUE(none.empty());
  ASSERT_OK_AND_ASSIGN(const double parsed_s, ParseDuration("1.5s", "x"));
  EXPECT_NEAR(parsed_s, 1.5, 1e-12);
  ASSERT_OK_AND_ASSIGN(const double parsed_us, ParseDuration("250us", "x"));
  EXPECT_NEAR(parsed_us, 0.00025, 1e-12);
  ASSERT_OK_AND_ASSIGN(const double parsed_plain, ParseDuration("0.02", "x"));
  EXPECT_NEAR(parsed_plain, 0.02, 1e-12);
  ASSERT_OK_AND_ASSIGN(const double longest, ParseDuration("3600000ms", "x"));
  EXPECT_EQ(longest, kMaxDelaySeconds);
  ASSERT_OK_AND_ASSIGN(const StragglerPlan slowest, StragglerPlan::Parse("", "", "1:1000", 4));
  EXPECT_NEAR(slowest.DelaySeconds(3, 0, 1, 0.5), 999 * 0.5, 1e-9);
}

}  // namespace
}  // namespace towerps::worker
