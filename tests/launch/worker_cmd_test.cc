#include "launch/worker_cmd.h"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/sibling_executable.h"
#include "launch/command_lines.h"
#include "launch/launch_options.h"

namespace towerps::launch {
namespace {

TEST(WorkerCmdTest, ReplacesTheWorkerBinaryWithTheLaunchersExecMode) {
  const std::vector<std::string> argv = WorkerCmdArgv(
      "python3 train.py --epochs 2", WorkerAllocator::kAuto,
      {"/opt/towerps/bin/towerps-worker", "--rank", "1", "--ps-endpoints", "tcp://h:1"});
  const std::vector<std::string> want = {SiblingExecutable("towerps-launch"),
                                         "--exec-worker-cmd",
                                         "python3 train.py --epochs 2",
                                         "auto",
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

// Runs `towerps-launch --exec-worker-cmd CMD ALLOCATOR` under `env` ("" or "NAME=value"): its
// output, then its exit status after a '|'.
std::string Exec(const std::string& cmd, const std::string& allocator,
                 const std::string& env = "") {
  const std::string line = (env.empty() ? "" : "env " + env + " ") + "'" +
                           SiblingExecutable("towerps-launch") + "' --exec-worker-cmd '" + cmd +
                           "' " + allocator + " 2>&1";
  FILE* out = popen(line.c_str(), "r");
  if (out == nullptr) return "popen failed";
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, out) != nullptr) text += buf;
  const int status = pclose(out);
  return text + "|" + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

// The script's process allocates with what --worker-allocator says: tcmalloc is mapped into it
// (first in LD_PRELOAD, any the user set kept after it), or not with system; a build without
// tcmalloc (the sanitized ones) runs auto on the C library's malloc and refuses tcmalloc.
TEST(WorkerCmdTest, TheScriptsProcessGetsTheAllocatorAsked) {
  const std::string maps = "grep -c tcmalloc /proc/self/maps";
  EXPECT_EQ(Exec(maps, "system"), "0\n|1");
  const std::string library = TcmallocLibrary();
  if (library.empty()) {
    EXPECT_EQ(Exec(maps, "auto"), "0\n|1");
    const std::string refused = Exec(maps, "tcmalloc");
    EXPECT_NE(refused.find("built without tcmalloc"), std::string::npos) << refused;
    EXPECT_NE(refused.find("|127"), std::string::npos) << refused;
    return;
  }
  for (const char* allocator : {"auto", "tcmalloc"}) {
    const std::string mapped = Exec(maps, allocator);
    EXPECT_NE(mapped.substr(0, 2), "0\n") << allocator << ": " << mapped;
    EXPECT_EQ(mapped.substr(mapped.size() - 2), "|0") << allocator << ": " << mapped;
  }
  EXPECT_EQ(Exec("echo $LD_PRELOAD", "auto", "LD_PRELOAD=libm.so.6"), library + ":libm.so.6\n|0");
  EXPECT_EQ(Exec("echo $LD_PRELOAD", "auto", "LD_PRELOAD=" + library), library + "\n|0");
}

TEST(WorkerCmdTest, ABadAllocatorIsRefusedNamingIt) {
  const std::string out = Exec("true", "jemalloc");
  EXPECT_NE(out.find("'jemalloc' is not auto, tcmalloc or system"), std::string::npos) << out;
  EXPECT_NE(out.find("|127"), std::string::npos) << out;
  EXPECT_FALSE(ParseWorkerAllocator("Tcmalloc").ok());
  EXPECT_EQ(*ParseWorkerAllocator("system"), WorkerAllocator::kSystem);
}

}  // namespace
}  // namespace towerps::launch
