// A model with a multi-hot field end to end (bag-mlp on the categorical dataset, whose labels
// depend on the mean of each example's 0 to 6 multi-hot ids' hidden scores): through
// towerps-launch with real servers and workers it learns, its bag table is trained, sync reruns
// end with the same bits, and a worker with two towers (each taking half of every batch's
// bags) ends where one tower does.
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

// --final-params-out (worker/train/final_params.h): dense variables by name, and per table its
// ids and rows.
struct FinalParams {
  std::map<std::string, std::vector<float>> values;
  std::map<std::string, std::vector<uint64_t>> ids;
};

FinalParams Parse(const std::string& bytes) {
  FinalParams p;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t eol = bytes.find('\n', at);
    if (eol == std::string::npos) break;
    std::istringstream header(bytes.substr(at, eol - at));
    std::string name;
    int64_t n = 0, dim = 0;
    header >> name >> n;
    const bool table = static_cast<bool>(header >> dim);
    at = eol + 1;
    if (table) {
      std::vector<uint64_t>& ids = p.ids[name];
      ids.resize(static_cast<size_t>(n));
      std::memcpy(ids.data(), bytes.data() + at, ids.size() * 8);
      at += ids.size() * 8;
      n *= dim;
    }
    std::vector<float>& v = p.values[name];
    v.resize(static_cast<size_t>(n));
    std::memcpy(v.data(), bytes.data() + at, v.size() * 4);
    at += v.size() * 4;
  }
  return p;
}

class BagJobTest : public LaunchTest {
 protected:
  void SetUp() override { ShowOnFailure("a.out"); }

  // bag-mlp on --dataset categorical, 2 servers; returns the launcher's exit code.
  int Run(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {kLaunchBin,
                                     "--servers",
                                     "2",
                                     "--model",
                                     "bag-mlp",
                                     "--dataset",
                                     "categorical",
                                     "--epochs",
                                     "100",
                                     "--table-lr",
                                     "0.5",
                                     "--log-every",
                                     "100",
                                     "--run-dir",
                                     (dir_ / (name + "-run")).string(),
                                     "--final-params-out",
                                     (dir_ / (name + ".bin")).string(),
                                     "--summary-out",
                                     (dir_ / (name + ".json")).string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Result<int> code = RunProcess(argv, dir_ / (name + ".out"), {}, seconds(300));
    EXPECT_TRUE(code.ok()) << code.status().ToString();
    return code.ok() ? *code : -1;
  }
  double Summary(const std::string& name, const std::string& key) const {
    const std::string summary = dir_.Read(name + ".json");
    const size_t at = summary.find("\"" + key + "\":");
    return at == std::string::npos ? -1 : std::atof(summary.c_str() + at + key.size() + 3);
  }
};

TEST_F(BagJobTest, SyncJobLearnsThroughTheBagAndARerunHasTheSameBits) {
  const std::vector<std::string> job = {"--workers",    "2",  "--max-steps", "300",
                                        "--batch-size", "512"};
  ASSERT_EQ(Run("a", job), 0);
  ASSERT_EQ(Run("b", job), 0);
  const std::string a = dir_.Read("a.bin");
  EXPECT_TRUE(a == dir_.Read("b.bin")) << "a sync rerun's final parameters differ";
  const FinalParams p = Parse(a);
  // The bag's ids are 8000 + k, k < 1000 Zipf: most of them were drawn and trained.
  ASSERT_EQ(p.ids.count("bag"), 1u);
  const std::vector<uint64_t>& ids = p.ids.at("bag");
  EXPECT_GT(ids.size(), 300u);
  for (uint64_t id : ids) {
    ASSERT_GE(id, 8000u);
    ASSERT_LT(id, 9000u);
  }
  // 4 classes: chance is about 0.25, and 300 steps reach about 0.7.
  EXPECT_GT(Summary("a", "test_accuracy"), 0.6);
}

// Two towers each take half of a batch's examples and their bags (offsets that start past 0);
// their averaged gradients are the one tower's up to float rounding.
TEST_F(BagJobTest, TwoTowersEndWhereOneTowerDoes) {
  const std::vector<std::string> job = {"--workers",    "1",   "--max-steps", "12",
                                        "--batch-size", "256", "--optimizer", "sgd",
                                        "--lr",         "0.05"};
  std::vector<std::string> two = job;
  two.insert(two.end(), {"--towers", "cpu:0,cpu:1"});
  ASSERT_EQ(Run("two", two), 0);
  ASSERT_EQ(Run("one", job), 0);
  const FinalParams a = Parse(dir_.Read("two.bin")), b = Parse(dir_.Read("one.bin"));
  EXPECT_EQ(a.ids, b.ids);
  ASSERT_EQ(a.values.size(), b.values.size());
  for (const auto& [name, x] : a.values) {
    const std::vector<float>& y = b.values.at(name);
    ASSERT_EQ(x.size(), y.size()) << name;
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      num += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
      den += static_cast<double>(x[i]) * x[i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-5) << name;
  }
}

}  // namespace
}  // namespace towerps::launch_test
