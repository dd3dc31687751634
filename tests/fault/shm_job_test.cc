// Shared memory in real jobs (towerps-launch, towerps-server and towerps-worker on Fashion-MNIST):
// a sync job ends with the same bits over --transport tcp, over shm, and with one worker on each
// path; and a worker killed with SIGKILL mid-job leaves nothing behind: no file in /dev/shm (the
// arenas are memfds) and no mapping of its arena in the server once the job has moved on.
#include <signal.h>
#include <sys/stat.h>

#include <set>
#include <sstream>

#include "tests/launch/launch_fixture.h"
#include "tests/testing/status_assert.h"

namespace towerps::launch_test {
namespace {

std::vector<std::string> JobArgv(const fs::path& dir, const std::string& model, int steps,
                                 std::vector<std::string> extra) {
  std::vector<std::string> argv = {kLaunchBin,
                                   "--servers",
                                   "1",
                                   "--workers",
                                   "2",
                                   "--model",
                                   model,
                                   "--max-steps",
                                   std::to_string(steps),
                                   "--log-every",
                                   "10",
                                   "--log-device-placement",
                                   "--run-dir",
                                   (dir / "run").string(),
                                   "--final-params-out",
                                   (dir / "final.bin").string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

// The inodes of the peer arenas and this process's own that `pid` has mapped.
std::set<std::string> ArenaInodes(pid_t pid) {
  std::set<std::string> inodes;
  std::istringstream maps(ReadFile("/proc/" + std::to_string(pid) + "/maps"));
  for (std::string line; std::getline(maps, line);) {
    if (line.find("towerps-arena") == std::string::npos) continue;
    std::istringstream fields(line);
    std::string range, perms, offset, dev, inode;
    fields >> range >> perms >> offset >> dev >> inode;
    inodes.insert(inode);
  }
  return inodes;
}

std::set<std::string> DevShm() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/dev/shm", ec)) names.insert(e.path().string());
  return names;
}

class ShmJobTest : public LaunchTest {
 protected:
  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << kNoFashionMnist;
    ShowOnFailure("out.txt");
  }
  // Runs a job to its end; returns its final parameters.
  std::string Run(const std::string& name, std::vector<std::string> extra) {
    const fs::path dir = dir_ / name;
    fs::create_directories(dir);
    Result<int> code =
        RunProcess(JobArgv(dir, "mlp", 120, std::move(extra)), dir / "out.txt", {}, seconds(300));
    EXPECT_TRUE(code.ok()) << code.status().ToString();
    EXPECT_EQ(code.ok() ? *code : -1, 0) << ReadFile(dir / "out.txt");
    return ReadFile(dir / "final.bin");
  }
  std::string Out(const std::string& name) { return ReadFile(dir_ / name / "out.txt"); }
};

TEST_F(ShmJobTest, SyncJobHasTheSameBitsOverTcpShmAndBothAtOnce) {
  const std::string tcp = Run("tcp", {"--transport", "tcp"});
  const std::string shm = Run("shm", {"--transport", "shm"});
  // One worker on each path: a wrapper gives worker 1 --transport tcp; the server and worker 0
  // use the default, auto.
  const fs::path wrapper = dir_ / "worker-tcp-for-rank-1.sh";
  {
    std::ofstream w(wrapper);
    w << "#!/bin/sh\ncase \" $* \" in *\" --rank 1 \"*) exec " << BinDir()
      << "/towerps-worker \"$@\" --transport tcp;; esac\nexec " << BinDir()
      << "/towerps-worker \"$@\"\n";
  }
  fs::permissions(wrapper, fs::perms::owner_all);
  const std::string mixed = Run("mixed", {"--worker-bin", wrapper.string()});
  ASSERT_GT(tcp.size(), 100000u);
  EXPECT_TRUE(shm == tcp) << "final parameters differ between --transport shm and tcp";
  EXPECT_TRUE(mixed == tcp) << "final parameters differ with one worker on each path";
  // Each worker says which path it uses (--log-device-placement).
  EXPECT_NE(Out("tcp").find("[worker:0] I"), std::string::npos);
  for (const char* w : {"[worker:0]", "[worker:1]"}) {
    EXPECT_NE(Out("tcp").find(std::string(w) + " I"), std::string::npos);
  }
  auto path_line = [&](const std::string& run, const std::string& worker) {
    const std::string out = Out(run);
    const size_t at = out.find(worker + " I");
    for (size_t p = at; p != std::string::npos; p = out.find(worker + " I", p + 1)) {
      const size_t end = out.find('\n', p);
      const std::string line = out.substr(p, end - p);
      if (line.find("ps:0 (") != std::string::npos) return line;
    }
    return std::string("(no path line)");
  };
  EXPECT_NE(path_line("shm", "[worker:1]").find("shared memory"), std::string::npos)
      << path_line("shm", "[worker:1]");
  EXPECT_NE(path_line("tcp", "[worker:1]").find("TCP (--transport tcp)"), std::string::npos)
      << path_line("tcp", "[worker:1]");
  EXPECT_NE(path_line("mixed", "[worker:0]").find("shared memory"), std::string::npos)
      << path_line("mixed", "[worker:0]");
  EXPECT_NE(path_line("mixed", "[worker:1]").find("TCP"), std::string::npos)
      << path_line("mixed", "[worker:1]");
}

TEST_F(ShmJobTest, AWorkerKilledMidPushLeavesNoSegmentBehind) {
  const std::set<std::string> shm_before = DevShm();
  Result<Subprocess> job =
      Start(JobArgv(dir_.path(), "cnn", 80, {"--transport", "shm"}), "out.txt");
  ASSERT_OK(job.status());
  const fs::path run = dir_ / "run";
  // cnn pushes each variable as its gradient is ready: a kill a few ms after a step line lands
  // during the step's pushes.
  ASSERT_TRUE(AwaitText(run / "worker-1.log", "step 20,", seconds(120))) << "no step 20";
  std::this_thread::sleep_for(milliseconds(15));
  const std::vector<pid_t> workers = ProcessPids(run, "worker", 1);
  const std::vector<pid_t> servers = ProcessPids(run, "ps", 0);
  ASSERT_FALSE(workers.empty());
  ASSERT_EQ(servers.size(), 1u);
  const std::set<std::string> before_kill = ArenaInodes(servers[0]);
  EXPECT_EQ(before_kill.size(), 3u) << "the server should map its arena and both workers'";
  ASSERT_EQ(kill(workers.back(), SIGKILL), 0);
  ASSERT_TRUE(AwaitText(dir_ / "out.txt", "worker:1 rejoined the job", seconds(60)));
  // Once the step the dead worker pushed to has completed, nothing holds its arena.
  ASSERT_TRUE(AwaitText(run / "worker-0.log", "step 60,", seconds(120))) << "no step 60";
  const std::set<std::string> after = ArenaInodes(servers[0]);
  EXPECT_EQ(after.size(), 3u) << "the dead worker's arena is still mapped by the server";
  const std::optional<int> code = job->Wait(Deadline::After(seconds(300)));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
  EXPECT_NE(dir_.Read("out.txt").find("worker:1 was killed by SIGKILL"), std::string::npos);
  EXPECT_EQ(DevShm(), shm_before) << "a file appeared in /dev/shm";
  for (const auto& [role, rank] :
       {std::pair<std::string, int>{"ps", 0}, {"worker", 0}, {"worker", 1}}) {
    for (pid_t pid : ProcessPids(run, role, rank)) {
      EXPECT_FALSE(ProcessAlive(pid)) << role << " " << rank << " outlived the job";
    }
  }
}

}  // namespace
}  // namespace towerps::launch_test
