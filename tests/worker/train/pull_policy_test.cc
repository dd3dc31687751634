// The worker's pull policy per mode (worker/train/pull_policy.h): sync pulls in lockstep and
// never past the last step; the other modes pull the latest values and count their own
// iterations.
#include "worker/train/pull_policy.h"

#include <gtest/gtest.h>

namespace towerps::worker {
namespace {

TEST(PullPolicyTest, SyncPullsTheNextStepNeverPastTheLastAndProgressesByVersion) {
  const PullPolicy& sync = PullPolicy::For(ps::UpdateMode::kSync);
  EXPECT_EQ(sync.NextVersion(3, 10), 4);
  EXPECT_EQ(sync.NextVersion(10, 10), 10);
  EXPECT_EQ(sync.Progress(/*iter=*/7, /*lowest=*/5), 5);  // a server restored behind
  EXPECT_FALSE(sync.RanLast(100, 10));                    // the servers' versions end it
  EXPECT_TRUE(sync.PastLast(10, 10));
  EXPECT_FALSE(sync.PastLast(9, 10));
  EXPECT_TRUE(sync.ReplacesPending(/*exact=*/false));
  EXPECT_FALSE(sync.ReplacesPending(/*exact=*/true));
  EXPECT_TRUE(sync.LastPullIsFinal());
}

TEST(PullPolicyTest, OtherModesPullTheLatestAndCountTheirOwnIterations) {
  for (ps::UpdateMode mode :
       {ps::UpdateMode::kAsync, ps::UpdateMode::kSsp, ps::UpdateMode::kSoftsync}) {
    const PullPolicy& latest = PullPolicy::For(mode);
    EXPECT_EQ(latest.NextVersion(3, 10), 0);
    EXPECT_EQ(latest.Progress(/*iter=*/7, /*lowest=*/2), 7);
    EXPECT_TRUE(latest.RanLast(10, 10));
    EXPECT_FALSE(latest.RanLast(9, 10));
    EXPECT_FALSE(latest.PastLast(50, 10));
    EXPECT_FALSE(latest.ReplacesPending(false));
    EXPECT_FALSE(latest.LastPullIsFinal());
  }
}

}  // namespace
}  // namespace towerps::worker
