// ReplicaRouter (ps/client/replica_router.h): which servers a client takes for dead, and when.
#include "ps/client/replica_router.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace towerps::ps {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

JobConfig TwoReplicatedServers() {
  JobConfig job;
  job.servers = 2;
  job.ps_replicas = 2;
  return job;
}

// Polls ProbeDue while `owes` says which servers owe replies, until one is found silent or
// `limit` passes; returns how long that took (limit when none was).
milliseconds TimeToSilent(ReplicaRouter& router, const std::vector<bool>& owes, int* silent,
                          milliseconds limit) {
  const auto start = Clock::now();
  while (Clock::now() - start < limit) {
    if (auto probe = router.ProbeDue(owes); probe && !probe->silent.empty()) {
      *silent = probe->silent.front();
      return std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  return limit;
}

// A server that has answered and then owes replies in silence is taken for dead after the short
// limit; one never heard from (still starting, perhaps) only after the long one.
TEST(ReplicaRouterTest, AServerNeverHeardFromGetsTheStartupLimit) {
  const ReplicaRouter::SilenceLimits limits{.heard = milliseconds(100),
                                            .never_heard = milliseconds(1500)};
  {
    ReplicaRouter router(TwoReplicatedServers(), 2, limits);
    router.Heard(0, 7);
    int silent = -1;
    const milliseconds took = TimeToSilent(router, {true, false}, &silent, milliseconds(5000));
    EXPECT_EQ(silent, 0);
    EXPECT_LT(took, milliseconds(1500)) << "heard once: the short limit";
  }
  {
    ReplicaRouter router(TwoReplicatedServers(), 2, limits);
    int silent = -1;
    const milliseconds took = TimeToSilent(router, {true, false}, &silent, milliseconds(8000));
    EXPECT_EQ(silent, 0);
    EXPECT_GE(took, milliseconds(1500)) << "never heard: not before the startup limit";
    EXPECT_LT(took, milliseconds(8000));
    // Failed over: its group goes to the other replica.
    EXPECT_EQ(router.FailOver(0), std::set<int>{1});
    EXPECT_EQ(router.RouteOf(0), 1);
    EXPECT_TRUE(router.unresponsive(0));
  }
}

// Without replicas nothing fails over: a silent server's requests time out instead.
TEST(ReplicaRouterTest, WithoutReplicasNoServerIsTakenForDead) {
  JobConfig job;
  job.servers = 2;
  ReplicaRouter router(job, 2, {.heard = milliseconds(50), .never_heard = milliseconds(50)});
  router.Heard(0, 7);
  int silent = -1;
  EXPECT_EQ(TimeToSilent(router, {true, true}, &silent, milliseconds(800)), milliseconds(800));
  EXPECT_EQ(silent, -1);
}

}  // namespace
}  // namespace towerps::ps
