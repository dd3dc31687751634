#include "launch/worker_cmd.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/sibling_executable.h"
#include "launch/command_lines.h"
#include "launch/launch_options.h"

namespace towerps::launch {
namespace {

TEST(WorkerCmdTest, ReplacesTheWorkerBinaryWithTheLaunchersExecMode) {
  const std::vector<std::string> argv = WorkerCmdArgv(
      "python3 train.py --epochs 2",
      {"/opt/towerps/bin/towerps-worker", "--rank", "1", "--ps-endpoints", "tcp://h:1"});
  const std::vector<std::string> want = {SiblingExecutable("towerps-launch"),
                                         "--exec-worker-cmd",
                                         "python3 train.py --epochs 2",
                                         "--rank",
                                         "1",
                                         "--ps-endpoints",
                                         "tcp://h:1"};
  EXPECT_EQ(argv, want);
}

TEST(WorkerCmdTest, ArgumentsTravelAsAJsonArrayOfStrings) {
  EXPECT_EQ(WorkerArgsJson({"--rank", "0", "say \"hi\""}), R"(["--rank","0","say \"hi\""])");
  EXPECT_EQ(WorkerArgsJson({}), "[]");
}

// A script's workers learn where worker 0 keeps their collectives' rendezvous (a hybrid job's
// torch.distributed group); native workers get no such flag; a --dist-endpoint given stands.
TEST(WorkerCmdTest, AScriptsWorkersGetTheirCollectivesRendezvous) {
  LaunchOptions o;
  EXPECT_EQ(DistEndpoint(o, "h", 7002), "");
  o.worker_cmd = "python3 train.py";
  EXPECT_EQ(DistEndpoint(o, "h", 7002), "tcp://h:7002");
  o.worker.dist_endpoint = DistEndpoint(o, "h", 7002);
  EXPECT_NE(WorkerArgsJson(WorkerJobArgs(o)).find(R"("--dist-endpoint","tcp://h:7002")"),
            std::string::npos);
  o.worker.dist_endpoint = "tcp://mine:9";
  EXPECT_EQ(DistEndpoint(o, "h", 7002), "tcp://mine:9");
}

// The native workers' step flags are refused for a script, which has its own, naming them.
TEST(WorkerCmdTest, NativeWorkersStepFlagsAreRefusedForAScript) {
  LaunchOptions o;
  o.worker_cmd = "python3 train.py";
  EXPECT_TRUE(ValidateLaunchOptions(o).ok()) << ValidateLaunchOptions(o);
  o.worker.bucket_bytes = 0;
  const Status bucket = ValidateLaunchOptions(o);
  EXPECT_NE(bucket.message().find("bucket_cap_mb=M"), std::string::npos) << bucket;
  o.worker.bucket_bytes = worker::WorkerOptions{}.bucket_bytes;
  o.worker.profile_steps = 5;
  const Status profile = ValidateLaunchOptions(o);
  EXPECT_NE(profile.message().find("torch.profiler"), std::string::npos) << profile;
}

}  // namespace
}  // namespace towerps::launch
