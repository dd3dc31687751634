// A click-through-rate model end to end: scripts/make_ctr_data.py writes Criteo-format files from
// a hidden logistic model whose Bayes AUC it prints, and towerps-launch trains ctr_mlp on them
// with real servers and workers. The job learns (its AUC and log loss well past a constant guess,
// and below the Bayes ceiling), sync reruns end with the same bits, tables included, async
// trains too, the summary, the metrics file and --eval-only report AUC and log loss, and the
// files streamed through a shuffle buffer train as well, to the same bits after a restart.
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

class CtrJobTest : public LaunchTest {
 protected:
  static void SetUpTestSuite() {
    data_ = new ScratchDir("ctr_job_data");
    Result<int> code = RunProcess({TOWERPS_MAKE_CTR_DATA, "--out", data_->path().string(),
                                   "--train", "20000", "--test", "5000", "--seed", "3"},
                                  *data_ / "make.txt", {}, seconds(120));
    ASSERT_TRUE(code.ok()) << code.status().ToString();
    ASSERT_EQ(*code, 0) << data_->Read("make.txt");
    answer_ = new nlohmann::json(nlohmann::json::parse(data_->Read("answer.json")));
  }
  static void TearDownTestSuite() {
    delete data_;
    delete answer_;
    data_ = nullptr;
    answer_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(answer_, nullptr);
    ShowOnFailure("a.out");
  }

  // Trains ctr_mlp for 3 epochs on 2 servers and 2 workers, less what `changes` (flag, value)
  // sets otherwise; returns the launcher's exit code.
  int Run(const std::string& name,
          const std::vector<std::pair<std::string, std::string>>& changes = {}) {
    Result<int> code = RunProcess(Argv(name, changes), dir_ / (name + ".out"), {}, seconds(300));
    EXPECT_TRUE(code.ok()) << code.status().ToString();
    return code.ok() ? *code : -1;
  }
  std::vector<std::string> Argv(const std::string& name,
                                const std::vector<std::pair<std::string, std::string>>& changes) {
    std::vector<std::pair<std::string, std::string>> flags = {
        {"--servers", "2"},
        {"--workers", "2"},
        {"--model", "ctr_mlp"},
        {"--dataset", "criteo"},
        {"--data-dir", data_->path().string()},
        {"--epochs", "3"},
        {"--batch-size", "128"},
        {"--optimizer", "adam"},
        {"--lr", "0.001"},
        {"--lr-schedule", "constant"},
        {"--table-optimizer", "adagrad"},
        {"--table-lr", "0.05"},
        {"--run-dir", (dir_ / (name + "-run")).string()},
        {"--final-params-out", (dir_ / (name + ".bin")).string()},
        {"--summary-out", (dir_ / (name + ".json")).string()},
        {"--metrics-out", (dir_ / (name + "-metrics-{rank}.jsonl")).string()}};
    for (const auto& change : changes) {  // (clang 14 lambdas cannot capture a binding)
      const auto it = std::find_if(flags.begin(), flags.end(),
                                   [&](const auto& f) { return f.first == change.first; });
      if (it == flags.end()) {
        flags.push_back(change);
      } else {
        it->second = change.second;
      }
    }
    std::vector<std::string> argv = {kLaunchBin};
    for (const auto& [flag, value] : flags) argv.insert(argv.end(), {flag, value});
    return argv;
  }
  nlohmann::json Summary(const std::string& name) const {
    return nlohmann::json::parse(dir_.Read(name + ".json"));
  }
  // The log loss of always answering the click rate: its binary entropy.
  static double ConstantGuessLogLoss() {
    const double p = (*answer_)["positive_rate"].get<double>();
    return -(p * std::log(p) + (1 - p) * std::log(1 - p));
  }

  static ScratchDir* data_;
  static nlohmann::json* answer_;
};

ScratchDir* CtrJobTest::data_ = nullptr;
nlohmann::json* CtrJobTest::answer_ = nullptr;

// A rerun ends with the same bits, and so does one that sends each gradient alone
// (--bucket-cap-mb 0) where the others bucket the small ones with the tables' push: the
// messages differ, the bits may not. The first run's profile follows the tables' rows too.
TEST_F(CtrJobTest, SyncJobLearnsTheClicksAndARerunHasTheSameBits) {
  ASSERT_EQ(Run("a", {{"--profile-steps", "20"}}), 0);
  ASSERT_EQ(Run("b"), 0);
  ASSERT_EQ(Run("c", {{"--bucket-cap-mb", "0"}}), 0);
  const std::string a = dir_.Read("a.bin");
  ASSERT_NE(a.find("categories "), std::string::npos) << "no table in --final-params-out";
  EXPECT_TRUE(a == dir_.Read("b.bin")) << "two identical sync runs ended with different bits";
  EXPECT_TRUE(a == dir_.Read("c.bin")) << "each gradient alone changed the bits";
  int tables = 0;
  const nlohmann::json profiled = Summary("a");
  for (const nlohmann::json& v : profiled.at("profile").at("variables")) {
    if (v.at("name").get<std::string>().rfind("categories", 0) != 0) continue;
    ++tables;  // a table's step: gradient, push, answer, rows, loaded, in that order
    const double gradient = v.at("gradient_ms"), sent = v.at("sent_ms");
    EXPECT_GT(gradient, 0) << v;
    EXPECT_LE(gradient, sent) << v;
    EXPECT_LE(sent, v.at("answered_ms").get<double>()) << v;
    EXPECT_LE(sent, v.at("arrived_ms").get<double>()) << v;
    EXPECT_LE(v.at("arrived_ms").get<double>(), v.at("loaded_ms").get<double>()) << v;
  }
  EXPECT_GE(tables, 1) << "no table in the profile";

  const nlohmann::json s = Summary("a");
  const double bayes = (*answer_)["bayes_auc"].get<double>();
  const double auc = s["test_auc"].get<double>();
  // The generator's ceiling is about 0.88 on this split; 20,000 examples reach about 0.79.
  EXPECT_GT(auc, 0.74) << "Bayes AUC " << bayes;
  EXPECT_LT(auc, bayes + 0.01);
  EXPECT_EQ(s["test_logloss"], s["test_loss"]);
  EXPECT_LT(s["test_logloss"].get<double>(), 0.9 * ConstantGuessLogLoss());
  EXPECT_GT(s["test_logloss"].get<double>(), (*answer_)["bayes_logloss"].get<double>() - 0.01);
  EXPECT_GT(s["table_rows"].get<int64_t>(), 1000);

  // Each evaluation's AUC and log loss go to --metrics-out and the log.
  int evals = 0;
  std::istringstream lines(dir_.Read("a-metrics-0.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] != "eval") continue;
    ++evals;
    EXPECT_GT(j["test_auc"].get<double>(), 0.6) << line;
    EXPECT_EQ(j["test_logloss"], j["test_loss"]) << line;
  }
  EXPECT_EQ(evals, 3);
  EXPECT_NE(dir_.Read("a.out").find("epoch 1 done: test AUC = 0."), std::string::npos);
}

// scripts/to_npy.py criteo writes what --dataset criteo reads (x_dense, x_ids, y): the same job
// on those files ends with the same bits.
TEST_F(CtrJobTest, TheSameDataAsNpyFilesGivesTheSameBits) {
  const fs::path npy = dir_ / "npy";
  Result<int> code = RunProcess(
      {TOWERPS_TO_NPY, "criteo", "--data-dir", data_->path().string(), "--out", npy.string()},
      dir_ / "to_npy.txt", {}, seconds(120));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  ASSERT_EQ(*code, 0) << dir_.Read("to_npy.txt");
  ASSERT_EQ(Run("criteo", {{"--model", "dlrm_small"}, {"--epochs", "1"}}), 0);
  ASSERT_EQ(Run("npy", {{"--model", "dlrm_small"},
                        {"--epochs", "1"},
                        {"--dataset", "npy"},
                        {"--data-dir", npy.string()}}),
            0);
  const std::string a = dir_.Read("criteo.bin");
  ASSERT_NE(a.find("C26 "), std::string::npos) << "no table C26 in --final-params-out";
  EXPECT_TRUE(a == dir_.Read("npy.bin")) << "the npy files trained differently";
  EXPECT_EQ(Summary("criteo")["test_auc"], Summary("npy")["test_auc"]);
}

// A click model recommends Adam and Adagrad at constant rates (ModelDef::recommended): a job that
// gives none of those flags trains with them, one that gives --lr keeps its own, the launcher
// says which it took, and the summary records the recommendation beside the job as it ran.
TEST_F(CtrJobTest, TheModelsRecommendedSettingsFillTheFlagsNotGiven) {
  const std::vector<std::string> argv = {kLaunchBin,
                                         "--servers",
                                         "1",
                                         "--workers",
                                         "1",
                                         "--model",
                                         "dlrm_small",
                                         "--dataset",
                                         "criteo",
                                         "--data-dir",
                                         data_->path().string(),
                                         "--max-steps",
                                         "20",
                                         "--lr",
                                         "0.002",
                                         "--run-dir",
                                         (dir_ / "rec-run").string(),
                                         "--summary-out",
                                         (dir_ / "rec.json").string()};
  Result<int> code = RunProcess(argv, dir_ / "rec.out", {}, seconds(300));
  ASSERT_TRUE(code.ok()) << code.status().ToString();
  ASSERT_EQ(*code, 0) << dir_.Read("rec.out");
  EXPECT_NE(dir_.Read("rec.out").find("model dlrm_small's recommended settings, for the flags not "
                                      "given: --lr-schedule constant --optimizer adam "
                                      "--table-lr 0.05 --table-optimizer adagrad"),
            std::string::npos)
      << dir_.Read("rec.out");
  const nlohmann::json s = Summary("rec");
  EXPECT_EQ(s["job"]["optimizer"], "adam");
  EXPECT_EQ(s["job"]["lr-schedule"], "constant");
  EXPECT_EQ(s["job"]["table-optimizer"], "adagrad");
  EXPECT_EQ(s["job"]["lr"], "0.002");  // given: kept
  EXPECT_EQ(s["model_recommends"]["lr"], "0.001");
  EXPECT_EQ(s["model_recommends"]["optimizer"], "adam");
}

// --shuffle-buffer streams the files through a buffer of 2000 examples per worker instead of
// loading them: the job learns as well, a rerun ends with the same bits, and a worker killed
// mid-epoch is restarted, re-reads its stream up to the step it rejoins at, and the job still
// ends with the undisturbed job's bits.
TEST_F(CtrJobTest, StreamedThroughAShuffleBufferItLearnsAndSurvivesAKilledWorkerBitForBit) {
  const std::vector<std::pair<std::string, std::string>> streamed = {{"--shuffle-buffer", "2000"},
                                                                     {"--log-every", "10"}};
  ASSERT_EQ(Run("s1", streamed), 0);
  ASSERT_EQ(Run("s2", streamed), 0);
  EXPECT_TRUE(dir_.Read("s1.bin") == dir_.Read("s2.bin")) << "a streamed rerun differs";
  EXPECT_GT(Summary("s1")["test_auc"].get<double>(), 0.74);
  EXPECT_NE(dir_.Read("s1.out").find("streaming criteo/train (20000 examples) through a shuffle "
                                     "buffer of 2000 examples"),
            std::string::npos);
  // Killed after step 100 of 234 (in the second epoch: 78 steps an epoch).
  Result<Subprocess> job = Start(Argv("killed", streamed), "killed.out");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const fs::path log = dir_ / "killed-run" / "worker-1.log";
  const Deadline deadline = Deadline::After(seconds(120));
  while (ReadFile(log).find("step 100,") == std::string::npos && !deadline.expired() &&
         !job->Poll()) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  const std::vector<pid_t> pids = ProcessPids(dir_ / "killed-run", "worker", 1);
  ASSERT_FALSE(pids.empty());
  ASSERT_EQ(::kill(pids.back(), SIGKILL), 0);
  ASSERT_EQ(job->Wait(Deadline::After(seconds(300))), std::optional<int>(0))
      << dir_.Read("killed.out");
  EXPECT_NE(dir_.Read("killed.out").find("worker:1 was killed by SIGKILL; restarting it"),
            std::string::npos);
  EXPECT_TRUE(dir_.Read("killed.bin") == dir_.Read("s1.bin"))
      << "the restarted worker did not read what its predecessor read";
}

// Click logs whose best AUC is about 0.67 (--signal 0.35): every click model learns, with an
// AUC short of that and a log loss that may sit above a constant guess's (poorly calibrated, well
// ranked), and none of them is called collapsed. With the labels shuffled (AUC 0.5 at best) a
// model never leaves chance: the job ends, reported as not learning, not as diverged.
TEST_F(CtrJobTest, WeakSignalModelsAreNotCalledCollapsedAndShuffledLabelsDidNotLearn) {
  auto make = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {TOWERPS_MAKE_CTR_DATA,
                                     "--out",
                                     (dir_ / name).string(),
                                     "--train",
                                     "20000",
                                     "--test",
                                     "5000",
                                     "--seed",
                                     "3",
                                     "--signal",
                                     "0.35"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Result<int> code = RunProcess(argv, dir_ / (name + ".txt"), {}, seconds(120));
    ASSERT_TRUE(code.ok() && *code == 0) << dir_.Read(name + ".txt");
  };
  make("weak", {});
  make("shuffled", {"--shuffle-labels"});
  const double best = nlohmann::json::parse(dir_.Read("weak/answer.json"))["bayes_auc"];
  ASSERT_LT(best, 0.7);
  for (const std::string model : {"dlrm_small", "wide_deep", "ctr_mlp"}) {
    SCOPED_TRACE(model);
    ASSERT_EQ(
        Run(model,
            {{"--model", model}, {"--data-dir", (dir_ / "weak").string()}, {"--epochs", "2"}}),
        0)
        << dir_.Read(model + ".out");
    const nlohmann::json s = Summary(model);
    EXPECT_EQ(s["diverged"], false);
    EXPECT_TRUE(s["divergence_kind"].is_null());
    EXPECT_EQ(s["left_chance"], true);
    EXPECT_GT(s["test_auc"].get<double>(), 0.55);
    EXPECT_LT(s["test_auc"].get<double>(), best + 0.02);
  }
  ASSERT_EQ(Run("shuffled", {{"--data-dir", (dir_ / "shuffled").string()}, {"--epochs", "2"}}), 0)
      << dir_.Read("shuffled.out");
  const nlohmann::json s = Summary("shuffled");
  EXPECT_EQ(s["diverged"], false);
  EXPECT_EQ(s["left_chance"], false);
  EXPECT_NEAR(s["test_auc"].get<double>(), 0.5, 0.03);
  EXPECT_NE(dir_.Read("shuffled.out").find("the model did not learn: test AUC"), std::string::npos);
}

TEST_F(CtrJobTest, AsyncJobLearnsTheClicks) {
  ASSERT_EQ(Run("async", {{"--mode", "async"}}), 0);
  const nlohmann::json s = Summary("async");
  EXPECT_GT(s["test_auc"].get<double>(), 0.74);
  EXPECT_FALSE(s["diverged"].get<bool>());
}

}  // namespace
}  // namespace towerps::launch_test
