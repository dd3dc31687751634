// --bind-cores: how a machine's cores are dealt to a job's processes (launch/core_binding.h), a
// child started on given cores (SubprocessOptions::cpus), and the launcher binding a real job.
#include "launch/core_binding.h"

#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <numeric>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

using launch::CoreBinding;
using launch::CpuList;
using launch::UsablePhysicalCores;

std::vector<int> Range(int from, int to) {
  std::vector<int> v(static_cast<size_t>(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// Cores of one CPU each: from, ..., to - 1.
std::vector<std::vector<int>> Cores(int from, int to) {
  std::vector<std::vector<int>> cores;
  for (int c = from; c < to; ++c) cores.push_back({c});
  return cores;
}

TEST(CoreBindingTest, OnTwoCoresEachOfTwoWorkersHasOneAndSharesItWithItsServer) {
  const CoreBinding b = CoreBinding::For(Cores(0, 2), 2);
  EXPECT_EQ(b.Worker(0), std::vector<int>{0});
  EXPECT_EQ(b.Worker(1), std::vector<int>{1});
  EXPECT_EQ(b.Server(0), std::vector<int>{0});
  EXPECT_EQ(b.Server(1), std::vector<int>{1});
  EXPECT_EQ(b.CpusPerWorker(), 1);
  EXPECT_FALSE(b.Shared(2));
  EXPECT_EQ(b.Describe(2, 2), "worker 0 and server 0 on CPU 0, worker 1 and server 1 on CPU 1");
}

TEST(CoreBindingTest, SlicesAreContiguousAndDifferByAtMostOneCore) {
  const CoreBinding b = CoreBinding::For(Cores(0, 8), 3);
  EXPECT_EQ(b.Worker(0), Range(0, 2));
  EXPECT_EQ(b.Worker(1), Range(2, 5));
  EXPECT_EQ(b.Worker(2), Range(5, 8));
  EXPECT_EQ(b.CpusPerWorker(), 2);
  // Servers take the slices in turn, as workers beyond the slices would.
  EXPECT_EQ(b.Server(3), Range(0, 2));
  EXPECT_EQ(b.Describe(3, 1),
            "worker 0 and server 0 on CPUs 0-1, worker 1 on CPUs 2-4, worker 2 on CPUs 5-7");
}

TEST(CoreBindingTest, MoreWorkersThanCoresShareThemInTurnAndOneWorkerKeepsAll) {
  const CoreBinding many = CoreBinding::For({{4}, {6}}, 3);
  EXPECT_EQ(many.Worker(0), std::vector<int>{4});
  EXPECT_EQ(many.Worker(1), std::vector<int>{6});
  EXPECT_EQ(many.Worker(2), std::vector<int>{4});
  EXPECT_TRUE(many.Shared(3));
  const CoreBinding one = CoreBinding::For(Cores(0, 4), 1);
  EXPECT_EQ(one.Worker(0), Range(0, 4));
  EXPECT_EQ(one.Server(5), Range(0, 4));
  const CoreBinding none = CoreBinding::For({}, 2);  // the CPUs could not be read
  EXPECT_FALSE(none.Bound());
  EXPECT_TRUE(none.Worker(0).empty());
}

// Hyperthreads numbered N/2 apart (cpu0's sibling is cpu4): each worker gets whole cores, never
// its neighbour's sibling.
TEST(CoreBindingTest, HyperthreadSiblingsStayInOneSlice) {
  const CoreBinding b = CoreBinding::For({{0, 4}, {1, 5}, {2, 6}, {3, 7}}, 2);
  EXPECT_EQ(b.Worker(0), (std::vector<int>{0, 1, 4, 5}));
  EXPECT_EQ(b.Worker(1), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_EQ(b.CpusPerWorker(), 4);
  EXPECT_EQ(b.Describe(2, 0), "worker 0 on CPUs 0-1,4-5, worker 1 on CPUs 2-3,6-7");
}

// This machine's cores, read from sysfs: every usable CPU once.
TEST(CoreBindingTest, UsableCoresHoldEachUsableCpuOnce) {
  std::vector<int> all;
  for (const auto& core : UsablePhysicalCores()) all.insert(all.end(), core.begin(), core.end());
  std::sort(all.begin(), all.end());
  EXPECT_FALSE(all.empty());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(static_cast<int>(all.size()), CPU_COUNT(&set));
}

TEST(CoreBindingTest, CpuListsNameRuns) {
  EXPECT_EQ(CpuList({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(CpuList({5}), "5");
  EXPECT_EQ(CpuList({1, 3, 4}), "1,3-4");
}

// What /proc says a process may run on: "0-1".
std::string AllowedCores(pid_t pid) {
  const std::string status = ReadFile("/proc/" + std::to_string(pid) + "/status");
  const std::string key = "Cpus_allowed_list:";
  const size_t at = status.find(key);
  if (at == std::string::npos) return "";
  size_t from = status.find_first_not_of(" \t", at + key.size());
  return status.substr(from, status.find('\n', from) - from);
}

class BindCoresTest : public LaunchTest {};

TEST_F(BindCoresTest, AChildStartedOnACoreRunsOnItAloneAndABadCoreIsRefused) {
  const int last = UsablePhysicalCores().back().back();
  SubprocessOptions o;
  o.argv = {"/bin/sh", "-c", "grep Cpus_allowed_list /proc/self/status"};
  o.output_path = (dir_ / "out").string();
  o.cpus = {last};
  Result<Subprocess> p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->Wait(Deadline::After(seconds(20))), std::optional<int>(0));
  EXPECT_EQ(dir_.Read("out"), "Cpus_allowed_list:\t" + std::to_string(last) + "\n");
  o.cpus = {-1};
  EXPECT_EQ(Subprocess::Start(o).status().code(), StatusCode::kInvalidArgument);
}

// A 2-worker, 2-server job: worker r and server r run on the r-th half of this machine's cores
// (all of them on a one-core machine), the workers started with the stand-in worker.
TEST_F(BindCoresTest, TheLauncherBindsEachWorkerAndItsServerToTheirSlice) {
  ShowOnFailure("launch.out");
  const fs::path run = dir_ / "run";
  Result<Subprocess> p =
      Start({kLaunchBin, "--worker-bin", FAKE_WORKER_BIN, "--run-dir", run.string(), "--servers",
             "2", "--workers", "2", "--epochs", "1000", "--bind-cores"},
            "launch.out");
  ASSERT_TRUE(p.ok()) << p.status();
  const CoreBinding expected = CoreBinding::For(UsablePhysicalCores(), 2);
  const Deadline started = Deadline::After(seconds(30));
  while (ProcessPids(run, "worker", 1).empty() && !started.expired()) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  for (int r = 0; r < 2; ++r) {
    for (const std::string role : {"worker", "ps"}) {
      const std::vector<pid_t> pids = ProcessPids(run, role, r);
      ASSERT_EQ(pids.size(), 1u) << role << " " << r;
      EXPECT_EQ(AllowedCores(pids[0]),
                CpuList(role == "ps" ? expected.Server(r) : expected.Worker(r)))
          << role << " " << r;
    }
  }
  EXPECT_NE(dir_.Read("launch.out").find("--bind-cores: " + expected.Describe(2, 2)),
            std::string::npos);
  kill(p->pid(), SIGTERM);
  EXPECT_TRUE(p->Wait(Deadline::After(seconds(20))).has_value());
}

TEST_F(BindCoresTest, TheModesWhoseEngineStartsTheProcessesRefuseIt) {
  std::ofstream(dir_ / "hosts") << "localhost slots=2\n";
  Result<int> code = RunProcess(
      {kLaunchBin, "--hostfile", (dir_ / "hosts").string(), "--bind-cores", "--validate-only"},
      dir_ / "hostfile.out", {}, seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2) << dir_.Read("hostfile.out");
  EXPECT_NE(dir_.Read("hostfile.out").find("--bind-cores binds the processes of a job on this"),
            std::string::npos)
      << dir_.Read("hostfile.out");
}

}  // namespace
}  // namespace towerps::launch_test
