// towerps-launch as users run it: the real binary, real servers, and a stand-in worker.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "common/subprocess.h"

namespace towerps::launch {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class LauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("launch_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- launcher output ----\n" << Output();
    fs::remove_all(dir_);
  }

  Subprocess Launch(std::vector<std::string> args) {
    SubprocessOptions o;
    o.argv = {TOWERPS_LAUNCH_BIN,      "--worker-bin", FAKE_WORKER_BIN, "--run-dir",
              (dir_ / "run").string(), "--grace-ms",   "3000"};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.output_path = (dir_ / "launch.out").string();
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok());
    return std::move(p).value();
  }
  std::string Output() const {
    std::ifstream in(dir_ / "launch.out");
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // pid of every process the launcher started, from processes.txt.
  std::vector<std::pair<std::string, pid_t>> Processes() const {
    std::vector<std::pair<std::string, pid_t>> out;
    std::ifstream in(dir_ / "run" / "processes.txt");
    std::string role, word, log;
    int rank;
    pid_t pid;
    while (in >> role >> rank >> word >> pid >> word >> log) {
      out.emplace_back(role + ":" + std::to_string(rank), pid);
    }
    return out;
  }
  static bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

  fs::path dir_;
};

TEST_F(LauncherTest, RunsAJobAndExitsZero) {
  Subprocess p = Launch({"--servers", "2", "--workers", "3", "--epochs", "2"});
  ASSERT_EQ(p.Wait(Deadline::After(seconds(60))), std::optional<int>(0)) << Output();
  const std::string out = Output();
  EXPECT_NE(out.find("[launch] run directory:"), std::string::npos);
  EXPECT_NE(out.find("[worker:2] step 9 done"), std::string::npos);  // prefixed, 2 epochs x 5
  EXPECT_NE(out.find("[ps:1]"), std::string::npos);
  EXPECT_NE(out.find("job finished"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "run" / "worker-1.log"));
  EXPECT_TRUE(fs::exists(dir_ / "run" / "ps-0.log"));
  const auto procs = Processes();
  ASSERT_EQ(procs.size(), 5u);
  for (const auto& [tag, pid] : procs) EXPECT_FALSE(Alive(pid)) << tag << " outlived the job";
}

TEST_F(LauncherTest, KilledWorkerStopsTheJobWithAClearMessage) {
  Subprocess p = Launch({"--servers", "1", "--workers", "3", "--epochs", "1000"});
  const Deadline started = Deadline::After(seconds(30));
  while (Processes().size() < 4 && !started.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto procs = Processes();
  ASSERT_EQ(procs.size(), 4u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // mid-run
  ASSERT_EQ(procs[2].first, "worker:1");
  kill(procs[2].second, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const std::optional<int> code = p.Wait(Deadline::After(seconds(30)));
  ASSERT_TRUE(code.has_value()) << "launcher hung after a worker died";
  EXPECT_NE(*code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, seconds(15));
  const std::string out = Output();
  EXPECT_NE(out.find("worker:1 exited with code 137"), std::string::npos) << out;
  EXPECT_NE(out.find("last lines of"), std::string::npos);
  for (const auto& [tag, pid] : procs) EXPECT_FALSE(Alive(pid)) << tag << " was left running";
}

TEST_F(LauncherTest, SigtermStopsEveryProcess) {
  Subprocess p = Launch({"--servers", "1", "--workers", "2", "--epochs", "1000"});
  const Deadline started = Deadline::After(seconds(30));
  while (Processes().size() < 3 && !started.expired())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto procs = Processes();
  ASSERT_EQ(procs.size(), 3u);
  kill(p.pid(), SIGTERM);
  const std::optional<int> code = p.Wait(Deadline::After(seconds(20)));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_NE(Output().find("signal 15 received"), std::string::npos);
  for (const auto& [tag, pid] : procs) EXPECT_FALSE(Alive(pid)) << tag << " was left running";
}

TEST_F(LauncherTest, BadOptionsAreRejectedBeforeAnythingStarts) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--workers", "0"}, "--workers"},
      {{"--mode", "eventual"}, "--mode=eventual"},
      {{"--lr", "-1"}, "--lr"},
      {{"--replicas-to-aggregate", "5", "--workers", "2"}, "--replicas-to-aggregate=5"},
      {{"--base-port", "70000"}, "--base-port=70000"},
      {{"--intra-op-threads", "0"}, "--intra-op-threads=0"},
      {{"--no-such-flag"}, "no-such-flag"},
      {{"--workers", "many"}, "workers"},
      {{"--server-bin", "/nonexistent/towerps-server"}, "/nonexistent/towerps-server"},
      {{"--straggler", "9:40ms"}, "--straggler rank 9"},
      {{"--straggler-dist", "gauss:1ms"}, "--straggler-dist=gauss:1ms"},
  };
  for (const auto& [args, expect] : cases) {
    Subprocess p = Launch(args);
    EXPECT_EQ(p.Wait(Deadline::After(seconds(20))), std::optional<int>(2)) << args[0];
    EXPECT_NE(Output().find(expect), std::string::npos) << Output();
    EXPECT_FALSE(fs::exists(dir_ / "run")) << "a process directory was created for " << args[0];
  }
}

TEST_F(LauncherTest, BadTowersAreRejectedBeforeAnyProcessStarts) {
  // The worker's own --towers grammar (worker::ParseTowerList), checked by the launcher: no
  // server is started only to see worker:0 exit with code 2.
  Subprocess p = Launch({"--towers", "cpu:x"});
  EXPECT_EQ(p.Wait(Deadline::After(seconds(20))), std::optional<int>(2));
  const std::string out = Output();
  EXPECT_NE(out.find("--towers"), std::string::npos) << out;
  EXPECT_NE(out.find("'cpu:x'"), std::string::npos) << out;
  EXPECT_EQ(out.find("[ps:0]"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "the launcher created its run directory";
}

}  // namespace
}  // namespace towerps::launch
