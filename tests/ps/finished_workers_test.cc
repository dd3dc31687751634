// FinishedWorkers (ps/server/finished_workers.h): in sync, where every step takes every worker's
// gradient, a step past a finished worker's last one is unreachable, with an error naming the
// worker and the way out; with backup workers or in async, no step is.
#include "ps/server/finished_workers.h"

#include <gtest/gtest.h>

namespace towerps::ps {
namespace {

JobConfig Job(UpdateMode mode, int workers, int replicas_to_aggregate = 0) {
  JobConfig j;
  j.mode = mode;
  j.workers = workers;
  j.replicas_to_aggregate = replicas_to_aggregate;
  return j;
}

TEST(FinishedWorkersTest, SyncStepsPastAFinishedWorkerAreUnreachableAndNameIt) {
  FinishedWorkers f(Job(UpdateMode::kSync, 3));
  EXPECT_EQ(f.WhyUnreachable(100), "");
  f.Add(2, 40);
  EXPECT_EQ(f.WhyUnreachable(40), "") << "step 40 took worker 2's gradient";
  const std::string why = f.WhyUnreachable(41);
  EXPECT_NE(why.find("worker 2 finished at step 40"), std::string::npos) << why;
  EXPECT_NE(why.find("step 41 cannot complete"), std::string::npos) << why;
  EXPECT_NE(why.find("--replicas-to-aggregate"), std::string::npos) << why;
  f.Add(1, 30);  // the lowest rank the step lacks is named
  EXPECT_NE(f.WhyUnreachable(41).find("worker 1 finished at step 30"), std::string::npos);
  EXPECT_NE(f.WhyUnreachable(35).find("worker 1"), std::string::npos);
}

TEST(FinishedWorkersTest, BackupWorkersAndAsyncStepsNeverWaitForAFinishedWorker) {
  for (const JobConfig& job :
       {Job(UpdateMode::kSync, 3, 2), Job(UpdateMode::kAsync, 3), Job(UpdateMode::kSsp, 3)}) {
    FinishedWorkers f(job);
    f.Add(0, 10);
    EXPECT_EQ(f.WhyUnreachable(11), "") << static_cast<int>(job.mode);
  }
}

}  // namespace
}  // namespace towerps::ps
