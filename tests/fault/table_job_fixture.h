// What the table job suites share (table_job_test, table_policy_job_test): embed-mlp on the
// categorical dataset through towerps-launch, 2 servers and 3 workers at 1024 examples a step,
// with the suite's own flags; an undisturbed reference run per suite; runs with a process
// SIGKILLed at a worker's step line; and the summary's numbers.
#ifndef TOWERPS_TESTS_FAULT_TABLE_JOB_FIXTURE_H_
#define TOWERPS_TESTS_FAULT_TABLE_JOB_FIXTURE_H_

#include <signal.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {

// A suite of `Steps` steps whose every job also takes `Flags()` (a function returning the
// suite's flags, e.g. a table policy).
template <int Steps, std::vector<std::string> (*Flags)()>
class TableJobFixture : public LaunchTest {
 protected:
  static constexpr int kSteps = Steps;

  static std::vector<std::string> JobArgv(const fs::path& dir, std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        kLaunchBin, "--servers", "2", "--workers", "3", "--model", "embed-mlp", "--dataset",
        "categorical", "--max-steps", std::to_string(Steps), "--epochs", "100", "--batch-size",
        // Steps of 1024 examples per worker: long enough (several ms) that a kill often lands
        // between a worker's pushes of one step, whose recomputation the restart tests check.
        "1024", "--log-every", "10", "--table-lr", "0.5", "--run-dir", (dir / "run").string(),
        "--final-params-out", (dir / "final.bin").string(), "--summary-out",
        (dir / "summary.json").string()};
    const std::vector<std::string> flags = Flags();
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  static void SetUpTestSuite() {
    ScratchDir dir("table_job_reference");
    Result<int> code = RunProcess(JobArgv(dir.path(), {}), dir / "out.txt", {}, seconds(300));
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

  // Runs the job; with `kill` (step, delay in ms), SIGKILLs `victim` ("worker" 1 by default, or
  // "ps" 0 or 1) once worker 1's step line shows, after the delay. Returns the launcher's exit
  // code.
  int Run(std::vector<std::string> extra = {}, std::optional<std::pair<int, int>> kill = {},
          const std::string& victim = "worker", int victim_rank = 1) {
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
      const std::vector<pid_t> pids = ProcessPids(dir_ / "run", victim, victim_rank);
      EXPECT_FALSE(pids.empty());
      if (!pids.empty()) {
        EXPECT_EQ(::kill(pids.back(), SIGKILL), 0);
      }
    }
    const std::optional<int> code = job->Wait(Deadline::After(seconds(300)));
    EXPECT_TRUE(code.has_value()) << "the job did not end";
    return code.value_or(-1);
  }

  // A number of the last run's summary; -1 when it has none.
  double Summary(const std::string& key) const {
    const std::string summary = dir_.Read("summary.json");
    const size_t at = summary.find("\"" + key + "\":");
    return at == std::string::npos ? -1 : std::atof(summary.c_str() + at + key.size() + 3);
  }

  // The final parameters of the suite's undisturbed job.
  static const std::string& reference() { return *reference_; }

 private:
  static inline std::string* reference_ = nullptr;
};

}  // namespace towerps::launch_test

#endif  // TOWERPS_TESTS_FAULT_TABLE_JOB_FIXTURE_H_
