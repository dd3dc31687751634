// A regression model end to end: regression_mlp on --dataset regression (targets a hidden linear
// function of 16 features plus noise of stddev 0.1, so the best test RMSE is 0.1) through
// towerps-launch with real servers and workers. It learns down to near the noise, sync reruns
// end with the same bits, two towers end where one does (each takes its slice of the targets),
// the summary, the metrics file and --eval-only report RMSE and no accuracy, and a classifier's
// dataset is refused before any process starts.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

class RegressionJobTest : public LaunchTest {
 protected:
  void SetUp() override { ShowOnFailure("a.out"); }

  // regression_mlp for 3 epochs (468 steps of 64 on 2 workers, unless `extra` names
  // --workers), on --dataset regression unless it names another; returns the exit code.
  int Run(const std::string& name, std::vector<std::string> extra = {}) {
    const auto given = [&](const char* flag) {
      return std::find(extra.begin(), extra.end(), flag) != extra.end();
    };
    if (!given("--workers")) extra.insert(extra.end(), {"--workers", "2"});
    if (!given("--dataset")) extra.insert(extra.end(), {"--dataset", "regression"});
    std::vector<std::string> argv = {kLaunchBin,
                                     "--servers",
                                     "2",
                                     "--model",
                                     "regression_mlp",
                                     "--epochs",
                                     "3",
                                     "--batch-size",
                                     "64",
                                     "--run-dir",
                                     (dir_ / (name + "-run")).string(),
                                     "--final-params-out",
                                     (dir_ / (name + ".bin")).string(),
                                     "--summary-out",
                                     (dir_ / (name + ".json")).string(),
                                     "--metrics-out",
                                     (dir_ / (name + "-metrics-{rank}.jsonl")).string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Result<int> code = RunProcess(argv, dir_ / (name + ".out"), {}, seconds(300));
    EXPECT_TRUE(code.ok()) << code.status().ToString();
    return code.ok() ? *code : -1;
  }
};

TEST_F(RegressionJobTest, SyncJobLearnsDownToTheNoiseAndReportsRmse) {
  const std::string ckpt = (dir_ / "ckpt").string();
  ASSERT_EQ(Run("a", {"--checkpoint-dir", ckpt}), 0);
  ASSERT_EQ(Run("b"), 0);
  EXPECT_TRUE(dir_.Read("a.bin") == dir_.Read("b.bin")) << "a sync rerun ended with other bits";
  const nlohmann::json s = nlohmann::json::parse(dir_.Read("a.json"));
  // The noise bounds it from below; predicting the mean would give about 1.0.
  const double rmse = s["test_rmse"].get<double>();
  EXPECT_GT(rmse, 0.09);
  EXPECT_LT(rmse, 0.13);
  EXPECT_NEAR(s["test_loss"].get<double>(), rmse * rmse, 1e-9);
  EXPECT_FALSE(s.contains("test_accuracy")) << "a regression has no classes";
  int evals = 0;
  std::istringstream lines(dir_.Read("a-metrics-0.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["kind"] != "eval") continue;
    ++evals;
    EXPECT_LT(j["test_rmse"].get<double>(), 0.3) << line;
    EXPECT_FALSE(j.contains("test_accuracy")) << line;
  }
  EXPECT_EQ(evals, 3);
  const std::string out = dir_.Read("a.out");
  EXPECT_NE(out.find("epoch 1 done: test RMSE = 0."), std::string::npos);
  EXPECT_EQ(out.find("accuracy"), std::string::npos) << "no accuracy for a regression";
  // --eval-only evaluates the checkpoint: the summary's RMSE.
  ASSERT_EQ(Run("eval", {"--eval-only", "--checkpoint-dir", ckpt}), 0);
  char expected[64];
  std::snprintf(expected, sizeof(expected), "test RMSE = %.6g", rmse);
  EXPECT_NE(dir_.Read("eval.out").find(expected), std::string::npos) << expected << "\n"
                                                                     << dir_.Read("eval.out");
}

// Two towers each take half of every batch and of its targets; their averaged gradients are the
// one tower's up to float rounding.
TEST_F(RegressionJobTest, TwoTowersEndWhereOneTowerDoes) {
  const std::vector<std::string> job = {"--workers", "1", "--max-steps", "20"};
  std::vector<std::string> two = job;
  two.insert(two.end(), {"--towers", "cpu:0,cpu:1"});
  ASSERT_EQ(Run("two", two), 0);
  ASSERT_EQ(Run("one", job), 0);
  const std::string a = dir_.Read("two.bin"), b = dir_.Read("one.bin");
  ASSERT_EQ(a.size(), b.size());
  // Whole files of "<name> <n>\n" and float32 values: compare the floats in relative norm.
  double num = 0, den = 0;
  size_t at = 0;
  while (at < a.size()) {
    const size_t eol = a.find('\n', at);
    ASSERT_NE(eol, std::string::npos);
    std::istringstream header(a.substr(at, eol - at));
    std::string name;
    size_t n = 0;
    header >> name >> n;
    at = eol + 1;
    for (size_t i = 0; i < n; ++i, at += 4) {
      float x = 0, y = 0;
      std::memcpy(&x, a.data() + at, 4);
      std::memcpy(&y, b.data() + at, 4);
      num += (static_cast<double>(x) - y) * (static_cast<double>(x) - y);
      den += static_cast<double>(x) * x;
    }
  }
  ASSERT_GT(den, 0);
  EXPECT_LT(std::sqrt(num / den), 1e-5);
  EXPECT_NE(a, b) << "the towers' sums differ in rounding; equal files would mean one tower ran";
}

TEST_F(RegressionJobTest, AClassifiersDatasetIsRefusedBeforeAnyProcessStarts) {
  EXPECT_EQ(Run("a", {"--dataset", "synthetic"}), 2);
  EXPECT_NE(dir_.Read("a.out").find("model regression_mlp predicts float targets"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "a-run" / "ps-0.log"));
}

}  // namespace
}  // namespace towerps::launch_test
