// When a server may stop (ps/server/shutdown_gate.h): a launcher's request at once; the chief's
// once every worker has left, or once its grace has passed.
#include "ps/server/shutdown_gate.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace towerps::ps {
namespace {

using std::chrono::milliseconds;

TEST(ShutdownGateTest, ALauncherStopsTheServerAtOnce) {
  ShutdownGate gate(3, milliseconds(60000));
  EXPECT_FALSE(gate.ShouldStop());
  gate.LauncherAsked();
  EXPECT_TRUE(gate.ShouldStop());
  EXPECT_FALSE(gate.GraceRanOut());
}

TEST(ShutdownGateTest, TheChiefWaitsForEveryOtherWorkerToLeave) {
  ShutdownGate gate(3, milliseconds(60000));
  gate.WorkerLeft(2);  // before the chief asks: counted
  EXPECT_FALSE(gate.ShouldStop()) << "no one asked to stop";
  gate.ChiefAsked();
  EXPECT_FALSE(gate.ShouldStop());
  EXPECT_EQ(gate.Missing(), "worker:1");
  gate.WorkerLeft(7);   // not a worker of the job: ignored
  gate.WorkerLeft(-1);  // nor this
  gate.WorkerLeft(2);   // twice: once
  EXPECT_FALSE(gate.ShouldStop());
  gate.WorkerLeft(1);
  EXPECT_TRUE(gate.ShouldStop());
  EXPECT_EQ(gate.Missing(), "");
}

TEST(ShutdownGateTest, TheChiefStopsTheServerAfterItsGraceWhoeverIsMissing) {
  ShutdownGate gate(3, milliseconds(50));
  gate.ChiefAsked();
  EXPECT_FALSE(gate.ShouldStop());
  EXPECT_EQ(gate.Missing(), "worker:1, worker:2");
  EXPECT_FALSE(gate.GraceRanOut());
  std::this_thread::sleep_for(milliseconds(80));
  EXPECT_TRUE(gate.ShouldStop());
  EXPECT_TRUE(gate.GraceRanOut());
  gate.ChiefAsked();  // asking again does not restart the grace
  EXPECT_TRUE(gate.ShouldStop());
}

TEST(ShutdownGateTest, ASingleWorkersChiefStopsTheServerAtOnce) {
  ShutdownGate gate(1, milliseconds(60000));
  gate.ChiefAsked();
  EXPECT_TRUE(gate.ShouldStop());
}

TEST(ShutdownGateTest, WithoutAnOrphanTimeoutTheServerWaitsForEver) {
  ShutdownGate gate(2, milliseconds(60000));
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_TRUE(gate.CheckNotOrphaned().ok());
  EXPECT_FALSE(gate.orphaned());
}

// The wait counts from the first check (Run's start), not from the gate's construction: a long
// restore in between does not orphan the server before it has listened at all.
TEST(ShutdownGateTest, AServerThatHearsFromNoWorkerIsOrphanedNamingThem) {
  ShutdownGate gate(3, milliseconds(60000), milliseconds(200));
  std::this_thread::sleep_for(milliseconds(250));
  EXPECT_TRUE(gate.CheckNotOrphaned().ok()) << "the wait starts at the first check";
  gate.Heard("worker:1");
  gate.WorkerLeft(1);
  gate.Heard("worker:2");
  std::this_thread::sleep_for(milliseconds(120));
  EXPECT_TRUE(gate.CheckNotOrphaned().ok()) << "heard since the last check: the wait restarts";
  std::this_thread::sleep_for(milliseconds(120));
  EXPECT_TRUE(gate.CheckNotOrphaned().ok()) << "120 ms of the 200 since";
  std::this_thread::sleep_for(milliseconds(150));
  const Status s = gate.CheckNotOrphaned();
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s;
  EXPECT_TRUE(gate.orphaned());
  EXPECT_NE(s.message().find("(worker:0 never contacted it; worker:2 went silent without "
                             "leaving)"),
            std::string::npos)
      << s;
  EXPECT_FALSE(gate.ShouldStop()) << "orphaned is a failure, not a request";
}

// Launchers count; strangers and ranks outside the job do not.
TEST(ShutdownGateTest, OnlyTheJobsWorkersAndLaunchersKeepTheServerAlive) {
  ShutdownGate gate(1, milliseconds(60000), milliseconds(50));
  EXPECT_TRUE(gate.CheckNotOrphaned().ok());
  for (int i = 0; i < 4; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
    gate.Heard("launcher-stats");
    EXPECT_TRUE(gate.CheckNotOrphaned().ok()) << i;
  }
  gate.Heard("worker:5");
  gate.Heard("admin");
  gate.Heard("worker:x");
  std::this_thread::sleep_for(milliseconds(70));
  const Status s = gate.CheckNotOrphaned();
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s;
  EXPECT_NE(s.message().find("(worker:0 never contacted it)"), std::string::npos) << s;
}

}  // namespace
}  // namespace towerps::ps
