// towerps-launch --logdir: TensorBoard event files from every worker and server of a real job
// (async, one worker slowed so that gradients are stale), read back by an independent reader
// (tests/scripts/tensorboard_check.py: its own TFRecord framing, every CRC-32C checked with
// python3-crc32c, the events decoded with python3-protobuf). The expected tags must appear, with
// increasing steps.
#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

class TensorBoardTest : public LaunchTest {};

TEST_F(TensorBoardTest, EveryProcessWritesEventsAnIndependentReaderAccepts) {
  if (!HaveFashionMnist()) GTEST_SKIP() << kNoFashionMnist;
  ShowOnFailure("launch.out");
  ShowOnFailure("check.out");
  const std::string logdir = (dir_ / "logs").string();
  Result<int> job = RunProcess({kLaunchBin, "--mode", "async", "--lr", "0.02", "--epochs", "2",
                                "--batch-size", "128", "--straggler", "1:0.005", "--log-every",
                                "50", "--logdir", logdir, "--run-dir", (dir_ / "run").string()},
                               dir_ / "launch.out", {}, seconds(180));
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(*job, 0);
  Result<int> check = RunProcess(
      {"/usr/bin/python3", TOWERPS_TENSORBOARD_CHECK, logdir,
       "worker-0=train/loss,train/examples_per_sec,train/sec_per_batch,train/wait_seconds,"
       "train/staleness,eval/accuracy,eval/loss",
       "worker-1=train/loss,train/staleness",
       "ps-0=ps/updates_applied,ps/stale_dropped,ps/bytes_in,ps/bytes_out,ps/staleness_mean,"
       "ps/staleness_p99,ps/staleness"},
      dir_ / "check.out", {}, seconds(60));
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_EQ(*check, 0);
  EXPECT_NE(dir_.Read("check.out").find("tensorboard files ok"), std::string::npos);

  // The reader is not lenient: one flipped byte in an event file fails its CRC.
  std::string file;
  for (const auto& e : fs::directory_iterator(dir_ / "logs" / "worker-1")) file = e.path();
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(200);
  char byte = 0;
  f.read(&byte, 1);
  f.seekp(200);
  byte = static_cast<char>(byte ^ 0x10);
  f.write(&byte, 1);
  f.close();
  Result<int> corrupt =
      RunProcess({"/usr/bin/python3", TOWERPS_TENSORBOARD_CHECK, logdir, "worker-1=train/loss"},
                 dir_ / "corrupt.out", {}, seconds(60));
  ASSERT_TRUE(corrupt.ok()) << corrupt.status();
  EXPECT_NE(*corrupt, 0);
  EXPECT_NE(dir_.Read("corrupt.out").find("CRC"), std::string::npos) << dir_.Read("corrupt.out");
}

}  // namespace
}  // namespace towerps::launch_test
