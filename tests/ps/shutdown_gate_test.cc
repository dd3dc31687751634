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

}  // namespace
}  // namespace towerps::ps
