// How the launcher names a failed process: its exit (a code, or the signal that killed it) and
// its own last error line.
#include "launch/job_supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace towerps::launch {
namespace {

TEST(DescribeExitTest, CodesAndSignalsReadAsWhatTheyAre) {
  EXPECT_EQ(DescribeExit(1), "exited with code 1");
  EXPECT_EQ(DescribeExit(2), "exited with code 2");
  EXPECT_EQ(DescribeExit(128 + SIGKILL), "was killed by SIGKILL");
  EXPECT_EQ(DescribeExit(128 + SIGSEGV), "was killed by SIGSEGV");
  EXPECT_EQ(DescribeExit(128 + SIGTERM), "was killed by SIGTERM");
  EXPECT_EQ(DescribeExit(255), "exited with code 255");  // ssh's own failure, not a signal
}

TEST(LastErrorLineTest, PrefersTheLastErrorLineOverLaterLines) {
  EXPECT_EQ(LastErrorLine({"[worker:2] I 05:39:18.790 training",
                           "[worker:2] E 05:39:19.001 first problem",
                           "[worker:2] E 05:39:19.002 diverged at step 341 (loss = nan)",
                           "summary: {}", "[worker:2] W 05:39:19.003 a warning"}),
            "diverged at step 341 (loss = nan)");
  EXPECT_EQ(LastErrorLine({"E 05:39:19.002 no tag here"}), "no tag here");
}

TEST(LastErrorLineTest, FallsBackToTheLastNonEmptyLine) {
  EXPECT_EQ(LastErrorLine({"towerps-worker: --lr=-1 must be positive", "", "  "}),
            "towerps-worker: --lr=-1 must be positive");
  EXPECT_EQ(LastErrorLine({"ERROR is not a level: E at the start needs a time"}),
            "ERROR is not a level: E at the start needs a time");
  EXPECT_EQ(LastErrorLine({}), "");
}

// The lines after "last lines of" are never missing: a child that printed nothing (or only
// blank lines) is said to have printed nothing.
TEST(StopReportTest, NamesTheLastLinesOrSaysThereWereNone) {
  EXPECT_EQ(StopReport("worker:1", "was killed by SIGKILL", "run/worker-1.log",
                       {"[worker:1] step 10", "[worker:1] E 05:39:19.002 bad"}),
            "[launch] worker:1 was killed by SIGKILL; last lines of run/worker-1.log:\n"
            "    [worker:1] step 10\n    [worker:1] E 05:39:19.002 bad\n"
            "[launch] stopping the job\n");
  const std::string expected =
      "[launch] ps:0 exited with code 1; it printed nothing (its log: run/ps-0.log)\n"
      "[launch] stopping the job\n";
  EXPECT_EQ(StopReport("ps:0", "exited with code 1", "run/ps-0.log", {}), expected);
  EXPECT_EQ(StopReport("ps:0", "exited with code 1", "run/ps-0.log", {"", "  "}), expected);
}

}  // namespace
}  // namespace towerps::launch
