#include "launch/worker_cmd.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/sibling_executable.h"

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

}  // namespace
}  // namespace towerps::launch
