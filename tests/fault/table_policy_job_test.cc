// A table job under every policy at once (admission after 2 steps, a TTL, a capacity with LRU
// eviction: job/table_policy.h) through towerps-launch, with real servers and workers: sync
// reruns give the same bits; a worker killed with SIGKILL and a server killed under
// --ps-replicas 2 both end with the undisturbed job's bits (the servers keep an evicted row's
// previous values and every pending count, so a restarted step or a backup decides the same);
// an async job completes; and the summary counts what the policies did.
#include <signal.h>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

constexpr int kSteps = 120;

std::vector<std::string> JobArgv(const fs::path& dir, std::vector<std::string> extra = {}) {
  std::vector<std::string> argv = {
      kLaunchBin, "--servers", "2", "--workers", "3", "--model", "embed-mlp", "--dataset",
      "categorical", "--max-steps", std::to_string(kSteps), "--epochs", "100", "--batch-size",
      "1024", "--log-every", "10", "--table-lr", "0.5",
      // Every policy at once: ids wait 2 steps, rows live 3 steps unless updated, and each
      // server holds at most 2400 rows of the table (of 8000 ids), the least recent evicted.
      "--table-admission-min-count", "2", "--table-ttl-steps", "3", "--table-capacity-rows", "2400",
      "--table-eviction", "lru", "--run-dir", (dir / "run").string(), "--final-params-out",
      (dir / "final.bin").string(), "--summary-out", (dir / "summary.json").string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

class TablePolicyJobTest : public LaunchTest {
 protected:
  static void SetUpTestSuite() {
    ScratchDir dir("table_policy_job_reference");
    Result<int> code = RunProcess(JobArgv(dir.path()), dir / "out.txt", {}, seconds(300));
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    ASSERT_EQ(*code, 0) << dir.Read("out.txt");
    reference_ = new std::string(dir.Read("final.bin"));
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(reference_, nullptr);
    ShowOnFailure("out.txt");
  }

  // Runs the job; with `kill` (step, delay in ms), SIGKILLs `victim` rank `rank` once worker
  // 1's step line shows, after the delay. Returns the launcher's exit code.
  int Run(std::vector<std::string> extra = {}, std::optional<std::pair<int, int>> kill = {},
          const std::string& victim = "worker", int rank = 1) {
    fs::remove_all(dir_ / "run");
    fs::remove(dir_ / "final.bin");
    Result<Subprocess> job = Start(JobArgv(dir_.path(), std::move(extra)), "out.txt");
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    if (!job.ok()) return -1;
    if (kill) {
      const fs::path log = dir_ / "run" / "worker-1.log";
      const std::string line = "step " + std::to_string(kill->first) + ",";
      const Deadline deadline = Deadline::After(seconds(60));
      while (ReadFile(log).find(line) == std::string::npos && !deadline.expired() && !job->Poll()) {
        std::this_thread::sleep_for(milliseconds(1));
      }
      std::this_thread::sleep_for(milliseconds(kill->second));
      const std::vector<pid_t> pids = ProcessPids(dir_ / "run", victim, rank);
      EXPECT_FALSE(pids.empty());
      if (!pids.empty()) EXPECT_EQ(::kill(pids.back(), SIGKILL), 0);
    }
    const std::optional<int> code = job->Wait(Deadline::After(seconds(300)));
    EXPECT_TRUE(code.has_value()) << "the job did not end";
    return code.value_or(-1);
  }

  double Summary(const std::string& key) const {
    const std::string summary = dir_.Read("summary.json");
    const size_t at = summary.find("\"" + key + "\":");
    return at == std::string::npos ? -1 : std::atof(summary.c_str() + at + key.size() + 3);
  }

  static std::string* reference_;
};

std::string* TablePolicyJobTest::reference_ = nullptr;

TEST_F(TablePolicyJobTest, SyncRerunHasTheSameBitsAndThePoliciesActed) {
  ASSERT_EQ(Run(), 0);
  EXPECT_TRUE(dir_.Read("final.bin") == *reference_) << "a rerun's final parameters differ";
  EXPECT_GT(Summary("table_rows_admitted"), 0);
  EXPECT_GT(Summary("table_gradients_dropped"), 0);
  EXPECT_GT(Summary("table_evicted_ttl"), 0);
  EXPECT_GT(Summary("table_evicted_capacity"), 0);
  EXPECT_LE(Summary("table_rows"), 2 * 2400);
  EXPECT_GT(Summary("test_accuracy"), 0.4);  // 4 classes: it still learns
  EXPECT_NE(dir_.Read("out.txt").find("by capacity"), std::string::npos);
}

TEST_F(TablePolicyJobTest, KilledWorkerIsRestartedAndTheFinalParametersAreBitIdentical) {
  for (const auto& [step, delay] : {std::make_pair(30, 2), std::make_pair(70, 5)}) {
    SCOPED_TRACE("worker 1 killed after step " + std::to_string(step));
    ASSERT_EQ(Run({}, std::make_pair(step, delay)), 0);
    EXPECT_NE(dir_.Read("out.txt").find("worker:1 was killed by SIGKILL; restarting it"),
              std::string::npos);
    EXPECT_TRUE(dir_.Read("final.bin") == *reference_)
        << "final parameters differ from the undisturbed job's";
  }
}

TEST_F(TablePolicyJobTest, KilledServerWithReplicasFailsOverAndTheFinalParametersAreBitIdentical) {
  const std::vector<std::string> replicas = {"--ps-replicas", "2"};
  ASSERT_EQ(Run(replicas, std::make_pair(50, 1), "ps", 1), 0);
  EXPECT_NE(dir_.Read("out.txt").find("ps:1 was killed by SIGKILL"), std::string::npos);
  EXPECT_TRUE(dir_.Read("final.bin") == *reference_)
      << "final parameters differ from the undisturbed job's";
}

TEST_F(TablePolicyJobTest, AsyncJobCompletes) {
  ASSERT_EQ(Run({"--mode", "async", "--lr", "0.02"}), 0);
  // Every worker's iterations applied once: each server at workers x steps versions.
  const std::string exact =
      "\"final_versions\":[" + std::to_string(3 * kSteps) + "," + std::to_string(3 * kSteps) + "]";
  EXPECT_NE(dir_.Read("summary.json").find(exact), std::string::npos) << dir_.Read("summary.json");
  EXPECT_GT(Summary("table_evicted_ttl") + Summary("table_evicted_capacity"), 0);
}

}  // namespace
}  // namespace towerps::launch_test
