// Restarts (local mode): a worker killed with SIGKILL at a seeded random moment is restarted by
// towerps-launch, recomputes the step its predecessor did not finish, and a sync job ends with
// final parameters bit-identical to the undisturbed job's; a server killed likewise comes back
// from its last checkpoint and the job completes. Real processes throughout: towerps-launch,
// towerps-server and towerps-worker on Fashion-MNIST.
#include <signal.h>

#include <cerrno>
#include <iostream>
#include <random>
#include <sstream>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

constexpr int kSteps = 60;

// The job of every test: 1 server, 3 workers, cnn, sync (the launcher's default mode), a step
// line every 10 steps. cnn's backward takes most of a step and pushes each variable as soon as
// its gradient is ready, so a random kill often lands between two pushes of one step.
std::vector<std::string> JobArgv(const fs::path& dir, std::vector<std::string> extra = {},
                                 const std::string& model = "cnn", int steps = kSteps,
                                 int workers = 3, int servers = 1) {
  std::vector<std::string> argv = {kLaunchBin,
                                   "--servers",
                                   std::to_string(servers),
                                   "--workers",
                                   std::to_string(workers),
                                   "--model",
                                   model,
                                   "--max-steps",
                                   std::to_string(steps),
                                   "--log-every",
                                   "10",
                                   "--run-dir",
                                   (dir / "run").string(),
                                   "--final-params-out",
                                   (dir / "final.bin").string(),
                                   "--summary-out",
                                   (dir / "summary.json").string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::vector<pid_t> Pids(const fs::path& run_dir, const std::string& role, int rank) {
  return ProcessPids(run_dir, role, rank);
}
bool Alive(pid_t pid) { return ProcessAlive(pid); }

class RestartTest : public LaunchTest {
 protected:
  static void SetUpTestSuite() {
    if (!HaveFashionMnist()) return;
    ScratchDir dir("restart_reference");
    Result<int> code = RunProcess(JobArgv(dir.path()), dir / "out.txt", {}, seconds(300));
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    ASSERT_EQ(*code, 0) << dir.Read("out.txt");
    reference_ = new std::string(dir.Read("final.bin"));
    ASSERT_GT(reference_->size(), 100000u);
  }
  static void TearDownTestSuite() {
    delete reference_;
    reference_ = nullptr;
  }
  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << kNoFashionMnist;
    ASSERT_NE(reference_, nullptr);
    ShowOnFailure("out.txt");
  }

  // Waits for worker `rank`'s step line `step` (a multiple of 10), then `delay_ms` more, and
  // kills that worker's current process with SIGKILL. Returns false (after a test failure) when
  // the job ended first.
  // A negative `rank` names server -rank - 1, killed at worker 0's step line.
  bool KillAt(Subprocess& job, int rank, int step, int delay_ms) {
    const bool server = rank < 0;
    const int who = server ? -rank - 1 : rank;
    const fs::path log = dir_ / "run" / ("worker-" + std::to_string(server ? 0 : rank) + ".log");
    const std::string line = "step " + std::to_string(step) + ",";
    // Counted from the log's start: a restarted worker's lines follow its predecessor's.
    const size_t seen = Count(ReadFile(log), line);
    const Deadline deadline = Deadline::After(seconds(120));
    while (Count(ReadFile(log), line) == seen) {
      if (deadline.expired() || job.Poll()) {
        ADD_FAILURE() << "worker:" << rank << " never logged " << line
                      << (job.Poll() ? " (the job ended)" : "");
        return false;
      }
      std::this_thread::sleep_for(milliseconds(2));
    }
    std::this_thread::sleep_for(milliseconds(delay_ms));
    const std::vector<pid_t> pids = Pids(dir_ / "run", server ? "ps" : "worker", who);
    if (pids.empty() || kill(pids.back(), SIGKILL) != 0) {
      ADD_FAILURE() << "cannot kill " << (server ? "ps:" : "worker:") << who;
      return false;
    }
    return true;
  }

  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  // Runs the job with `extra` flags, killing the workers `kills` names (rank, step, delay) in
  // turn; returns the launcher's exit code.
  int RunWithKills(const std::vector<std::tuple<int, int, int>>& kills,
                   std::vector<std::string> extra = {}, const std::string& model = "cnn",
                   int steps = kSteps) {
    Result<Subprocess> job =
        Start(JobArgv(dir_.path(), std::move(extra), model, steps, workers_, servers_), "out.txt");
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    if (!job.ok()) return -1;
    for (const auto& [rank, step, delay] : kills) {
      if (!KillAt(*job, rank, step, delay)) break;
    }
    const std::optional<int> code = job->Wait(Deadline::After(seconds(300)));
    EXPECT_TRUE(code.has_value()) << "the job did not end";
    ExpectNothingLeft();
    return code.value_or(-1);
  }

  // Every process the job started, restarted ones included, is gone.
  void ExpectNothingLeft() {
    for (const auto& [role, n] :
         {std::pair<std::string, int>{"ps", 2}, std::pair<std::string, int>{"worker", workers_}}) {
      for (int r = 0; r < n; ++r) {
        for (pid_t pid : Pids(dir_ / "run", role, r)) {
          EXPECT_FALSE(Alive(pid)) << role << " " << r << " (pid " << pid << ") outlived the job";
        }
      }
    }
  }

  void ExpectBitIdentical() {
    const std::string got = dir_.Read("final.bin");
    EXPECT_EQ(got.size(), reference_->size());
    EXPECT_TRUE(got == *reference_) << "final parameters differ from the undisturbed job's";
  }

  void KillAtRandomMoments(int rank, uint32_t seed);

  // Seeded kill moments: a step line between 10 and kSteps - 10, then 0-200 ms: a step or more
  // (a cnn step takes 10-20 ms on an idle machine, 150 ms on a loaded 2-core one, where a kill
  // within 60 ms of the line seldom found pushes on their way).
  static std::vector<std::tuple<int, int, int>> Moments(int rank, int count, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::tuple<int, int, int>> out;
    for (int i = 0; i < count; ++i) {
      const int step = 10 * std::uniform_int_distribution<int>(1, kSteps / 10 - 1)(rng);
      out.emplace_back(rank, step, std::uniform_int_distribution<int>(0, 200)(rng));
    }
    return out;
  }

  // A number of the chief's summary (one line of JSON); -1 when it is missing.
  double SummaryDouble(const std::string& key) const {
    const std::string summary = dir_.Read("summary.json");
    const std::string quoted = "\"" + key + "\":";
    const size_t at = summary.find(quoted);
    return at == std::string::npos ? -1 : std::atof(summary.c_str() + at + quoted.size());
  }
  long SummaryNumber(const std::string& key) const { return static_cast<long>(SummaryDouble(key)); }
  // Pushes the servers dropped (stale or repeated).
  long DroppedStale() const { return SummaryNumber("dropped_stale"); }

  int workers_ = 3;  // of the jobs RunWithKills starts
  int servers_ = 1;
  static std::string* reference_;
};

std::string* RestartTest::reference_ = nullptr;

// Kills worker `rank` at seeded moments, at least 5 and until one landed while some of its
// gradients for the step were already on the server (at most 10): then its successor recomputes
// the step, and the server drops its repeated pushes. Every run must end with the undisturbed
// job's bits.
void RestartTest::KillAtRandomMoments(int rank, uint32_t seed) {
  const std::string tag = "worker:" + std::to_string(rank);
  int repeated = 0;  // runs where the successor re-pushed what the server already had
  int runs = 0;
  for (const auto& moment : Moments(rank, /*count=*/10, seed)) {
    if (runs >= 5 && repeated > 0) break;
    ++runs;
    SCOPED_TRACE(tag + " killed after step " + std::to_string(std::get<1>(moment)) + " + " +
                 std::to_string(std::get<2>(moment)) + " ms");
    fs::remove_all(dir_ / "run");
    fs::remove(dir_ / "final.bin");
    fs::remove(dir_ / "summary.json");
    ASSERT_EQ(RunWithKills({moment}), 0);
    const std::string out = dir_.Read("out.txt");
    EXPECT_NE(out.find(tag + " was killed by SIGKILL; restarting it (1 of 3)"), std::string::npos);
    EXPECT_NE(out.find(tag + " rejoined the job"), std::string::npos);
    // The chief (restarted or not) evaluated and wrote the summary, with the restart counted.
    const std::string summary = dir_.Read("summary.json");
    EXPECT_NE(summary.find("\"test_accuracy\""), std::string::npos);
    EXPECT_NE(summary.find("\"restarts\":1"), std::string::npos);
    ExpectBitIdentical();
    if (DroppedStale() > 0) ++repeated;
  }
  EXPECT_GT(repeated, 0) << "in " << runs << " runs no kill landed while " << tag
                         << "'s gradients for its step were partly on the server: the "
                            "recomputation was never checked";
}

TEST_F(RestartTest, KilledWorkerIsRestartedAndTheFinalParametersAreBitIdentical) {
  KillAtRandomMoments(/*rank=*/2, /*seed=*/20261123);
}

TEST_F(RestartTest, KilledChiefIsRestartedAndTheFinalParametersAreBitIdentical) {
  KillAtRandomMoments(/*rank=*/0, /*seed=*/7);
}

TEST_F(RestartTest, TwoDeathsAreCountedAndBitIdentical) {
  ASSERT_EQ(RunWithKills({{1, 20, 5}, {1, 40, 15}}), 0);
  const std::string out = dir_.Read("out.txt");
  EXPECT_NE(out.find("worker:1 was killed by SIGKILL; restarting it (2 of 3)"), std::string::npos);
  EXPECT_NE(out.find("restarted worker:1 2x"), std::string::npos);
  EXPECT_NE(dir_.Read("summary.json").find("\"restarts\":2"), std::string::npos);
  ExpectBitIdentical();
}

TEST_F(RestartTest, SecondDeathBeyondMaxRestartsEndsTheJobNamingTheWorker) {
  EXPECT_NE(RunWithKills({{1, 20, 5}, {1, 40, 15}}, {"--max-restarts", "1"}), 0);
  const std::string out = dir_.Read("out.txt");
  EXPECT_NE(out.find("worker:1 was killed by SIGKILL; restarting it (1 of 1)"), std::string::npos);
  EXPECT_NE(out.find("worker:1 was killed by SIGKILL again, after 1 restart(s) "
                     "(--max-restarts=1 is spent)"),
            std::string::npos);
}

TEST_F(RestartTest, ZeroMaxRestartsFailsFast) {
  EXPECT_NE(RunWithKills({{2, 20, 0}}, {"--max-restarts", "0"}), 0);
  const std::string out = dir_.Read("out.txt");
  EXPECT_NE(out.find("towerps-launch: worker:2 was killed by SIGKILL"), std::string::npos);
  EXPECT_EQ(out.find("restarting it"), std::string::npos);
}

// Async: no bits to match (arrival order decides), but every iteration of every worker is
// applied exactly once per chunk: the disturbed job applies as many updates as the undisturbed
// one, and trains as well.
TEST_F(RestartTest, AsyncWorkerRestartAppliesEveryIterationOnce) {
  const std::vector<std::string> async = {"--mode", "async", "--lr", "0.01"};
  ASSERT_EQ(RunWithKills({}, async, "mlp", 300), 0);
  const long undisturbed = SummaryNumber("updates_applied");
  const double accuracy = SummaryDouble("test_accuracy");
  ASSERT_GT(undisturbed, 0);
  fs::remove_all(dir_ / "run");
  fs::remove(dir_ / "summary.json");
  ASSERT_EQ(RunWithKills({{2, 100, 3}}, async, "mlp", 300), 0);
  EXPECT_NE(dir_.Read("out.txt").find("worker:2 was killed by SIGKILL; restarting it (1 of 3)"),
            std::string::npos);
  EXPECT_EQ(SummaryNumber("updates_applied"), undisturbed);
  EXPECT_NEAR(SummaryDouble("test_accuracy"), accuracy, 0.02);
}

// The only server, without replicas, killed at seeded moments with checkpoints every 50
// versions: the launcher restarts it from its checkpoint, every worker sees the new incarnation,
// rejoins at the restored version and recomputes the steps since (the same batches, from the
// same restored parameters); the job completes. The issue asks for the undisturbed accuracy
// within 0.01; with the checkpoint taken between two steps, the bits match as well.
TEST_F(RestartTest, KilledOnlyServerComesBackFromItsCheckpointAndTheJobCompletes) {
  const std::vector<std::string> checkpoints = {"--checkpoint-every", "50", "--checkpoint-dir",
                                                (dir_ / "ckpt").string()};
  ASSERT_EQ(RunWithKills({}, checkpoints, "mlp", 300), 0);
  const double accuracy = SummaryDouble("test_accuracy");
  const std::string undisturbed = dir_.Read("final.bin");
  std::mt19937 rng(2026);
  for (int run = 0; run < 3; ++run) {
    const int step = 10 * std::uniform_int_distribution<int>(6, 25)(rng);
    const int delay = std::uniform_int_distribution<int>(0, 5)(rng);
    SCOPED_TRACE("ps:0 killed after step " + std::to_string(step) + " + " + std::to_string(delay) +
                 " ms");
    fs::remove_all(dir_ / "run");
    fs::remove_all(dir_ / "ckpt");
    fs::remove(dir_ / "summary.json");
    ASSERT_EQ(RunWithKills({{-1, step, delay}}, checkpoints, "mlp", 300), 0);
    const std::string out = dir_.Read("out.txt");
    EXPECT_NE(out.find("ps:0 was killed by SIGKILL; restarting it from its last checkpoint "
                       "(1 of 3)"),
              std::string::npos);
    EXPECT_NE(out.find("restarted ps:0 1x"), std::string::npos);
    EXPECT_NEAR(SummaryDouble("test_accuracy"), accuracy, 0.01);
    EXPECT_EQ(SummaryNumber("restarts"), 1);
    if (dir_.Read("final.bin") == undisturbed) std::cout << "  (final parameters bit-identical)\n";
  }
}

// Async with 4 workers, one worker and then the only server killed (no replicas: the server
// comes back from its checkpoint, every 200 versions): the job completes and trains as well as
// the undisturbed one.
TEST_F(RestartTest, AsyncJobSurvivesAWorkerAndTheServerKilled) {
  workers_ = 4;
  const std::vector<std::string> job = {"--mode",
                                        "async",
                                        "--lr",
                                        "0.01",
                                        "--checkpoint-every",
                                        "200",
                                        "--checkpoint-dir",
                                        (dir_ / "ckpt").string()};
  ASSERT_EQ(RunWithKills({}, job, "mlp", 400), 0);
  const double accuracy = SummaryDouble("test_accuracy");
  fs::remove_all(dir_ / "run");
  fs::remove_all(dir_ / "ckpt");
  fs::remove(dir_ / "summary.json");
  ASSERT_EQ(RunWithKills({{2, 100, 2}, {-1, 250, 1}}, job, "mlp", 400), 0);
  const std::string out = dir_.Read("out.txt");
  EXPECT_NE(out.find("restarted ps:0 1x, worker:2 1x"), std::string::npos);
  EXPECT_EQ(SummaryNumber("restarts"), 2);
  EXPECT_NEAR(SummaryDouble("test_accuracy"), accuracy, 0.01);
}

// --ps-replicas 2 with 2 servers and 2 workers: a server killed at a seeded moment (either one:
// each is the primary of half the chunks and the backup of the other half) fails its chunks
// over to the other, the launcher restarts it as their backup, and the job ends with the bits of
// the undisturbed job without replicas.
TEST_F(RestartTest, KilledServerWithReplicasFailsOverAndTheFinalParametersAreBitIdentical) {
  servers_ = 2;
  workers_ = 2;
  ASSERT_EQ(RunWithKills({}), 0);
  const std::string undisturbed = dir_.Read("final.bin");
  std::mt19937 rng(15);
  for (int run = 0; run < 3; ++run) {
    const int victim = run % 2;
    const int step = 10 * std::uniform_int_distribution<int>(1, kSteps / 10 - 1)(rng);
    const int delay = std::uniform_int_distribution<int>(0, 60)(rng);
    const std::string tag = "ps:" + std::to_string(victim);
    SCOPED_TRACE(tag + " killed after step " + std::to_string(step) + " + " +
                 std::to_string(delay) + " ms");
    fs::remove_all(dir_ / "run");
    fs::remove(dir_ / "final.bin");
    fs::remove(dir_ / "summary.json");
    ASSERT_EQ(RunWithKills({{-1 - victim, step, delay}}, {"--ps-replicas", "2"}), 0);
    const std::string out = dir_.Read("out.txt");
    EXPECT_NE(out.find(tag + " was killed by SIGKILL; its chunks fail over to ps:" +
                       std::to_string(1 - victim) + "; restarting it as their backup (1 of 3)"),
              std::string::npos);
    // A restarted backup that a loaded machine stalls past the acknowledgement timeout
    // (ps/server/shard.h) is replaced and restarts once more: a failover its log explains.
    const int replaced = static_cast<int>(Count(out, "it was replaced while unresponsive"));
    EXPECT_EQ(SummaryNumber("failovers"), 1 + replaced);
    EXPECT_TRUE(dir_.Read("final.bin") == undisturbed)
        << "final parameters differ from the undisturbed job's";
    if (HasFailure()) {
      std::cout << "---- out.txt of this run ----\n" << out;
      break;
    }
  }
}

// Async with replicas (2 servers, 3 workers): a server and then a worker killed. Every chunk
// ends at exactly workers x steps versions, so no iteration was lost or applied twice across
// the failover (the backup replays the primary's pushes in its order; the rejoining worker's
// repeats are dropped); the job trains as well as the undisturbed one.
TEST_F(RestartTest, AsyncReplicasApplyEveryIterationOnceAcrossAFailover) {
  servers_ = 2;
  const std::vector<std::string> job = {"--mode", "async", "--lr", "0.01", "--ps-replicas", "2"};
  ASSERT_EQ(RunWithKills({}, job, "mlp", 300), 0);
  const double accuracy = SummaryDouble("test_accuracy");
  const std::string exact = "\"final_versions\":[900,900]";
  EXPECT_NE(dir_.Read("summary.json").find(exact), std::string::npos);
  fs::remove_all(dir_ / "run");
  fs::remove(dir_ / "summary.json");
  ASSERT_EQ(RunWithKills({{-1, 100, 2}, {1, 200, 1}}, job, "mlp", 300), 0);
  const std::string out = dir_.Read("out.txt");
  EXPECT_NE(out.find("ps:0 was killed by SIGKILL; its chunks fail over to ps:1"),
            std::string::npos);
  EXPECT_NE(dir_.Read("summary.json").find(exact), std::string::npos) << dir_.Read("summary.json");
  // At least the one the test caused: on a loaded machine the restarted ps:0 can be too slow to
  // rejoin, be replaced by its backup and restart once more (a second, legitimate failover).
  // Every iteration must still be applied once (the versions above).
  EXPECT_GE(SummaryNumber("failovers"), 1);
  // Async runs differ by their interleaving alone: five undisturbed runs of this job gave
  // 0.844 to 0.857. A failover that lost or broke training would cost far more than 0.03.
  EXPECT_NEAR(SummaryDouble("test_accuracy"), accuracy, 0.03);
}

// Replicas and checkpoints together: a job run again on its checkpoints (each server restores
// its own) resumes; the primary first sends the backup its state, whose acknowledgement lets the
// workers' pulls through. The rerun has nothing left to do and ends with the same parameters.
TEST_F(RestartTest, ReplicatedJobResumesFromItsCheckpoints) {
  servers_ = 2;
  workers_ = 2;
  const std::vector<std::string> job = {"--ps-replicas",      "2",
                                        "--checkpoint-dir",   (dir_ / "ckpt").string(),
                                        "--checkpoint-every", "30"};
  ASSERT_EQ(RunWithKills({}, job, "mlp", 100), 0);
  const std::string first = dir_.Read("final.bin");
  fs::remove_all(dir_ / "run");
  fs::remove(dir_ / "final.bin");
  ASSERT_EQ(RunWithKills({}, job, "mlp", 100), 0);
  EXPECT_TRUE(dir_.Read("final.bin") == first);
}

// --servers 1 --ps-replicas 2: the launcher adds a standby server holding the backups. Killing
// the only primary fails over to the standby; killing the standby leaves the primary serving
// alone until the standby rejoins. Both end with the undisturbed job's bits.
TEST_F(RestartTest, OneServerWithAStandbySurvivesTheDeathOfEither) {
  for (int victim : {0, 1}) {
    SCOPED_TRACE("ps:" + std::to_string(victim) + " killed");
    fs::remove_all(dir_ / "run");
    fs::remove(dir_ / "final.bin");
    ASSERT_EQ(RunWithKills({{-1 - victim, 30, 20}}, {"--ps-replicas", "2"}), 0);
    EXPECT_NE(dir_.Read("out.txt").find(
                  victim == 0 ? "ps:0 was killed by SIGKILL; its chunks fail over to ps:1"
                              : "ps:1 was killed by SIGKILL; ps:0 serves without its backups "
                                "meanwhile; restarting it as their backup"),
              std::string::npos);
    ExpectBitIdentical();
  }
}

// A primary that stops answering (SIGSTOP) is taken for dead by the workers after 1.25 s of
// silence, and its backup takes over and tells it so. When it wakes up it reads that it was
// replaced, exits 75, and the launcher restarts it as the backup. Same bits.
TEST_F(RestartTest, SilentPrimaryIsReplacedAndRejoinsWhenItWakes) {
  Result<Subprocess> job =
      Start(JobArgv(dir_.path(), {"--ps-replicas", "2"}, "cnn", kSteps, workers_), "out.txt");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const fs::path log = dir_ / "run" / "worker-0.log";
  const Deadline deadline = Deadline::After(seconds(120));
  while (ReadFile(log).find("step 20,") == std::string::npos && !deadline.expired() &&
         !job->Poll()) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  const std::vector<pid_t> pids = Pids(dir_ / "run", "ps", 0);
  ASSERT_FALSE(pids.empty());
  ASSERT_EQ(kill(pids.back(), SIGSTOP), 0);
  const Deadline failover = Deadline::After(seconds(30));
  while (ReadFile(log).find("stopped answering") == std::string::npos && !failover.expired()) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(kill(pids.back(), SIGCONT), 0);
  const std::optional<int> code = job->Wait(Deadline::After(seconds(300)));
  ASSERT_EQ(code.value_or(-1), 0);
  ExpectNothingLeft();
  const std::string out = dir_.Read("out.txt");
  EXPECT_NE(out.find("stopped answering; its chunks fail over to server 1"), std::string::npos);
  if (out.find("ps:0 exited with code 75; it was replaced while unresponsive; restarting it as "
               "the backup of its chunks") != std::string::npos) {
    std::cout << "  (ps:0 learnt it was replaced and rejoined as the backup)\n";
  }
  ExpectBitIdentical();
}

// Without --checkpoint-dir a server's state dies with it: the job stops and says how to
// survive this.
TEST_F(RestartTest, KilledServerWithoutCheckpointsEndsTheJobAndSaysWhy) {
  EXPECT_NE(RunWithKills({{-1, 20, 0}}, {}, "mlp", 300), 0);
  EXPECT_NE(dir_.Read("out.txt").find("ps:0 was killed by SIGKILL (without --checkpoint-dir a "
                                      "server's state dies with it"),
            std::string::npos);
}

}  // namespace
}  // namespace towerps::launch_test
