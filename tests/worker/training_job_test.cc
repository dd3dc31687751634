// The main job end to end: towerps-launch starting real towerps-server and towerps-worker
// processes on Fashion-MNIST. Final parameters are compared through --final-params-out.
//
// Comparisons of different batch splits use plain SGD at a small learning rate: float rounding
// differs between the splits, and a ReLU whose input sits at zero can then flip for one example;
// a small learning rate bounds what such a flip can change.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#include "common/job_secret.h"
#include "common/subprocess.h"
#include "tests/testing/sanitized.h"

namespace towerps {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;
using Params = std::map<std::string, std::vector<float>>;

class TrainingJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
    }
    dir_ = fs::temp_directory_path() /
           ("job_test_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << last_output_;
    fs::remove_all(dir_);
  }

  // Runs towerps-launch to completion; returns its exit code.
  int Launch(const std::string& name, std::vector<std::string> args, int timeout_s = 300) {
    SubprocessOptions o;
    o.argv = {TOWERPS_LAUNCH_BIN, "--run-dir", (dir_ / name).string()};
    if (std::find(args.begin(), args.end(), "--log-every") == args.end()) {
      args.insert(args.end(), {"--log-every", "100000"});
    }
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.output_path = (dir_ / (name + ".out")).string();
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) {
      last_output_ = p.status().ToString();
      return -1;
    }
    auto code = p->Wait(Deadline::After(seconds(timeout_s)));
    std::ifstream in(o.output_path);
    last_output_ = std::string(std::istreambuf_iterator<char>(in), {});
    return code.value_or(-1);
  }

  std::string Path(const std::string& file) const { return (dir_ / file).string(); }

  static Params Load(const std::string& path) {
    Params p;
    std::ifstream in(path, std::ios::binary);
    std::string name;
    int64_t n;
    while (in >> name >> n) {
      in.get();
      std::vector<float> v(n);
      in.read(reinterpret_cast<char*>(v.data()), n * 4);
      p[name] = std::move(v);
    }
    return p;
  }

  static void ExpectClose(const Params& a, const Params& b, double tolerance) {
    ASSERT_EQ(a.size(), b.size());
    ASSERT_FALSE(a.empty());
    for (const auto& [name, x] : a) {
      const std::vector<float>& y = b.at(name);
      ASSERT_EQ(x.size(), y.size()) << name;
      double num = 0, den = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        num += (static_cast<double>(x[i]) - y[i]) * (static_cast<double>(x[i]) - y[i]);
        den += static_cast<double>(x[i]) * x[i];
      }
      EXPECT_LT(std::sqrt(num / den), tolerance) << name;
    }
  }

  // Reads a number field from the chief's summary JSON.
  static double SummaryField(const std::string& path, const std::string& field) {
    std::ifstream in(path);
    const std::string s((std::istreambuf_iterator<char>(in)), {});
    const size_t at = s.find("\"" + field + "\":");
    if (at == std::string::npos) return NAN;
    return std::atof(s.c_str() + at + field.size() + 3);
  }

  fs::path dir_;
  std::string last_output_;
};

const std::vector<std::string> kSmallSgd = {"--optimizer", "sgd",         "--lr",
                                            "0.01",        "--max-steps", "12"};

std::vector<std::string> With(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST_F(TrainingJobTest, NWorkersAtBMatchOneWorkerAtNB) {
  ASSERT_EQ(Launch("n", With({"--workers", "2", "--batch-size", "32", "--final-params-out",
                              Path("n.bin")},
                             kSmallSgd)),
            0);
  ASSERT_EQ(Launch("one", With({"--workers", "1", "--batch-size", "64", "--final-params-out",
                                Path("one.bin")},
                               kSmallSgd)),
            0);
  ExpectClose(Load(Path("n.bin")), Load(Path("one.bin")), 1e-5);
}

TEST_F(TrainingJobTest, TwoTowersAt2BMatchOneTowerAt2B) {
  ASSERT_EQ(Launch("towers", With({"--workers", "1", "--towers", "cpu:0,cpu:1", "--batch-size",
                                   "64", "--final-params-out", Path("t.bin")},
                                  kSmallSgd)),
            0);
  ASSERT_EQ(Launch("tower", With({"--workers", "1", "--batch-size", "64", "--final-params-out",
                                  Path("o.bin")},
                                 kSmallSgd)),
            0);
  ExpectClose(Load(Path("t.bin")), Load(Path("o.bin")), 1e-5);
}

TEST_F(TrainingJobTest, IdenticalSyncRunsAreBitwiseIdentical) {
  const std::vector<std::string> job = {"--workers",   "3",  "--servers",    "2",
                                        "--max-steps", "40", "--batch-size", "16"};
  ASSERT_EQ(Launch("a", With(job, {"--final-params-out", Path("a.bin")})), 0);
  ASSERT_EQ(Launch("b", With(job, {"--final-params-out", Path("b.bin")})), 0);
  const Params a = Load(Path("a.bin")), b = Load(Path("b.bin"));
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "two identical sync runs ended with different parameters";
}

// ResNet-20 (batch norm, residual blocks) through the parameter server on CIFAR-10-format
// files: it trains, its batch-norm moving statistics reach the servers, and two identical sync
// runs end with the same bits, moving statistics included.
TEST_F(TrainingJobTest, ResNet20SyncRunsOnCifarFilesAreBitwiseIdentical) {
  const fs::path data = dir_ / "cifar";
  fs::create_directories(data);
  std::mt19937 rng(7);
  const auto write = [&](const std::string& name, int records) {
    std::string bytes;
    for (int r = 0; r < records; ++r) {
      bytes.push_back(static_cast<char>(rng() % 10));
      for (int i = 0; i < 3072; ++i) bytes.push_back(static_cast<char>(rng() & 0xff));
    }
    std::ofstream(data / name, std::ios::binary) << bytes;
  };
  for (int i = 1; i <= 5; ++i) write("data_batch_" + std::to_string(i) + ".bin", 40);
  write("test_batch.bin", 40);
  const std::vector<std::string> job = {"--servers",   "1",       "--workers",    "2",
                                        "--mode",      "sync",    "--model",      "resnet20",
                                        "--dataset",   "cifar10", "--data-dir",   data.string(),
                                        "--max-steps", "6",       "--batch-size", "8"};
  ASSERT_EQ(Launch("a", With(job, {"--final-params-out", Path("a.bin")}), 600), 0) << last_output_;
  ASSERT_EQ(Launch("b", With(job, {"--final-params-out", Path("b.bin")}), 600), 0) << last_output_;
  const Params a = Load(Path("a.bin")), b = Load(Path("b.bin"));
  ASSERT_TRUE(a.count("stage1_block1/bn1/moving_mean")) << "no batch-norm statistics saved";
  EXPECT_TRUE(a == b) << "two identical sync runs ended with different parameters";
  // The moving mean left its initial zeros: the workers' batch statistics reached the servers.
  const std::vector<float>& mean = a.at("stage1_block1/bn1/moving_mean");
  EXPECT_TRUE(std::any_of(mean.begin(), mean.end(), [](float m) { return m != 0.0f; }));
  const std::vector<float>& var = a.at("stage1_block1/bn1/moving_variance");
  EXPECT_TRUE(std::any_of(var.begin(), var.end(), [](float v) { return v != 1.0f; }));
}

// The same Fashion-MNIST, as IDX files and converted to .npy by scripts/to_npy.py (uint8, and
// float32 pixel / 255): the same job reaches the same test accuracy within 0.01. The .npy runs
// normalize with statistics computed from the training set, the IDX run with Fashion-MNIST's
// published constants, so the bits differ slightly but the accuracy must not.
TEST_F(TrainingJobTest, NpyFashionMnistReachesTheIdxAccuracy) {
#ifdef TOWERPS_SANITIZED
  GTEST_SKIP() << "three 1-epoch jobs are checked by the release suite";
#endif
  const std::vector<std::string> job = {"--servers", "1",   "--workers", "2",
                                        "--model",   "mlp", "--epochs",  "1"};
  if (Launch("idx", With(job, {"--summary-out", Path("idx.json")})) != 0) {
    GTEST_SKIP() << "no Fashion-MNIST here (dataset-fashion-mnist): " << last_output_;
  }
  const double idx = SummaryField(Path("idx.json"), "test_accuracy");
  for (const std::string dtype : {"uint8", "float32"}) {
    const std::string out = Path("npy-" + dtype);
    const std::string convert = std::string("python3 ") + TOWERPS_TO_NPY +
                                " idx --data-dir /usr/share/datasets/fashion-mnist --dtype " +
                                dtype + " --out " + out + " > " + out + ".log 2>&1";
    ASSERT_EQ(std::system(convert.c_str()), 0) << convert;
    ASSERT_EQ(Launch(dtype, With(job, {"--dataset", "npy", "--data-dir", out, "--summary-out",
                                       Path(dtype + ".json")})),
              0)
        << last_output_;
    const double npy = SummaryField(Path(dtype + ".json"), "test_accuracy");
    // One epoch from slightly different inputs lands within a few tenths of a percent: 0.0057
    // apart for float32 on one AMD EPYC host (0.8551 against 0.8494, the same with the code
    // before and after the combined push-pull), under 0.005 on the hosts before it. A misread
    // file (labels shifted, pixels unscaled) costs far more.
    EXPECT_NEAR(npy, idx, 0.01) << dtype;
    EXPECT_GT(npy, 0.8) << dtype;
  }
}

TEST_F(TrainingJobTest, SyncMlpReachesTheAccuracyTarget) {
#ifdef TOWERPS_SANITIZED
  GTEST_SKIP() << "10 epochs are checked by the release suite; sanitizers make them slow";
#endif
  ASSERT_EQ(Launch("mlp",
                   {"--servers", "2", "--workers", "4", "--mode", "sync", "--model", "mlp",
                    "--epochs", "10", "--summary-out", Path("s.json")},
                   600),
            0);
  EXPECT_GE(SummaryField(Path("s.json"), "test_accuracy"), 0.88) << last_output_;
  EXPECT_EQ(SummaryField(Path("s.json"), "steps"), 2340);  // 10 epochs of 60000 / (4 x 64)
  // The split of the chief's time: computing and waiting are parts of training; the servers
  // spent time in updates.
  const double compute = SummaryField(Path("s.json"), "compute_seconds");
  const double wait = SummaryField(Path("s.json"), "wait_seconds");
  EXPECT_GT(compute, 0);
  EXPECT_GT(SummaryField(Path("s.json"), "server_update_seconds"), 0);
  EXPECT_LE(compute + wait, SummaryField(Path("s.json"), "train_seconds"));
}

// --profile-steps: the chief's summary says where its steps went. On the CPU backward hands each
// gradient on as its layer finishes, so, each gradient going alone (--bucket-cap-mb 0), the last
// layer's push leaves before the first layer's gradient exists, and every push before compute
// ends; the last layer's values, answered during backward, are loaded while the first layer's
// round trip is in flight (StepExchange::LoadArrived), not after it.
TEST_F(TrainingJobTest, ProfileStepsShowPushesOverlappingBackward) {
  const std::string summary = Path("profile.json");
  // One worker: in sync a value comes back once every worker pushed it, so with two the order
  // the chief loads in would follow the other worker's pace.
  ASSERT_EQ(
      Launch("profile", With(kSmallSgd, {"--model", "cnn", "--workers", "1", "--profile-steps", "5",
                                         "--bucket-cap-mb", "0", "--summary-out", summary})),
      0);
  std::ifstream in(summary);
  const nlohmann::json p = nlohmann::json::parse(in).at("profile");
  EXPECT_EQ(p.at("steps"), 5);
  EXPECT_GT(p.at("compute_ms").get<double>(), 0);
  EXPECT_GE(p.at("step_ms").get<double>(), p.at("compute_ms").get<double>());
  EXPECT_EQ(p.at("pushes_before_compute_end").get<double>(), 1.0);
  std::map<std::string, nlohmann::json> v;
  for (const nlohmann::json& var : p.at("variables")) v[var.at("name")] = var;
  ASSERT_EQ(v.size(), 8u);
  EXPECT_LT(v.at("logits/kernel").at("sent_ms").get<double>(),
            v.at("conv1/kernel").at("gradient_ms").get<double>());
  EXPECT_LT(v.at("logits/kernel").at("loaded_ms").get<double>(),
            v.at("conv1/kernel").at("loaded_ms").get<double>());
  for (const auto& [name, var] : v) {
    EXPECT_LE(var.at("gradient_ms").get<double>(), var.at("sent_ms").get<double>()) << name;
    EXPECT_LE(var.at("sent_ms").get<double>(), var.at("answered_ms").get<double>()) << name;
    EXPECT_LE(var.at("arrived_ms").get<double>(), var.at("loaded_ms").get<double>()) << name;
  }
  EXPECT_FALSE(p.at("critical_path").at("variable").get<std::string>().empty());
  // The servers' update time: summed over threads, and in wall-clock time (never more).
  std::ifstream again(summary);
  const nlohmann::json s = nlohmann::json::parse(again);
  EXPECT_GT(s.at("server_update_wall_seconds").get<double>(), 0);
  EXPECT_LE(s.at("server_update_wall_seconds").get<double>(),
            s.at("server_update_seconds").get<double>() * 1.001 + 1e-6);
}

// At the default rate: --lr-scaling share makes it the sync job's rate per example.
TEST_F(TrainingJobTest, AsyncAndSspCompleteAndReportStaleness) {
  const int epochs = testing::kSanitized ? 1 : 2;  // the release suite trains two
  for (const std::string mode : {"async", "ssp"}) {
    const std::string summary = Path(mode + ".json");
    std::vector<std::string> args = {"--servers",     "2",    "--workers", "4",
                                     "--mode",        mode,   "--epochs",  std::to_string(epochs),
                                     "--summary-out", summary};
    if (mode == "ssp") args.insert(args.end(), {"--staleness", "2"});
    ASSERT_EQ(Launch(mode, args), 0) << mode;
    EXPECT_GT(SummaryField(summary, "mean_staleness"), 0) << mode;
    EXPECT_GE(SummaryField(summary, "p99_staleness"), 1) << mode;
    EXPECT_GT(SummaryField(summary, "test_accuracy"), 0.75) << mode;
    // Every worker's every gradient was applied: 4 workers x 234 steps an epoch x 6 chunks.
    EXPECT_EQ(SummaryField(summary, "updates_applied"), 4 * 234 * epochs * 6) << mode;
    // Each worker checked its gradients as it pushed them: no server read one for that again.
    EXPECT_EQ(SummaryField(summary, "server_finite_checks"), 0) << mode;
  }
}

// n-softsync across processes: 2 servers, 4 workers, n = 2: each update averages 2 gradients,
// so the chunks apply half as many updates as async, every gradient once, with staleness.
// With --evals-per-epoch 3 the chief also evaluates at a third and two thirds of the epoch.
TEST_F(TrainingJobTest, SoftsyncCompletesAndAppliesEveryGradientOnce) {
  const std::string summary = Path("softsync.json");
  ASSERT_EQ(
      Launch("softsync", {"--servers", "2", "--workers", "4", "--mode", "softsync", "--softsync-n",
                          "2", "--lr", "0.02", "--epochs", "1", "--summary-out", summary,
                          "--evals-per-epoch", "3", "--metrics-out", Path("m-{rank}.jsonl")}),
      0);
  EXPECT_EQ(SummaryField(summary, "updates_applied"), 2 * 234 * 6);  // n x steps x chunks
  EXPECT_EQ(SummaryField(summary, "dropped_stale"), 0);
  EXPECT_GT(SummaryField(summary, "mean_staleness"), 0);
  EXPECT_GT(SummaryField(summary, "test_accuracy"), 0.75);
  std::vector<int> eval_steps;
  std::ifstream in(Path("m-0.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (line.find("\"kind\":\"eval\"") == std::string::npos) continue;
    eval_steps.push_back(std::atoi(line.c_str() + line.find("\"step\":") + 7));
  }
  EXPECT_EQ(eval_steps, (std::vector<int>{78, 156, 234}));  // the last one: the final evaluation
  EXPECT_NE(last_output_.find("step 78: test accuracy = "), std::string::npos);
}

TEST_F(TrainingJobTest, StragglerDelaysByTheRequestedAmount) {
  ASSERT_EQ(Launch("straggler", {"--workers", "2", "--max-steps", "40", "--straggler", "1:40ms",
                                 "--metrics-out", Path("m-{rank}.jsonl"), "--log-every", "20"}),
            0);
  auto last_field = [&](int rank, const std::string& field) {
    std::ifstream in(Path("m-" + std::to_string(rank) + ".jsonl"));
    double value = NAN;
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find("\"" + field + "\":");
      if (line.find("\"kind\":\"train\"") != std::string::npos && at != std::string::npos) {
        value = std::atof(line.c_str() + at + field.size() + 3);
      }
    }
    return value;
  };
  EXPECT_NEAR(last_field(1, "delay_seconds"), 0.040, 0.001);
  EXPECT_NEAR(last_field(0, "delay_seconds"), 0.0, 1e-9);
  // The straggler's steps take at least the delay, and in sync mode worker 0 spends about that
  // long at the barrier every step.
  EXPECT_GE(last_field(1, "step_seconds"), 0.040);
  EXPECT_GE(last_field(0, "wait_seconds"), 0.030);
  EXPECT_LE(last_field(0, "wait_seconds"), 0.200);
}

// Without restarts (--max-restarts 0), a dead worker ends the job; tests/fault covers restarts.
TEST_F(TrainingJobTest, KilledWorkerStopsTheJobWithoutRestarts) {
  SubprocessOptions o;
  o.argv = {TOWERPS_LAUNCH_BIN, "--run-dir", Path("kill"),     "--workers", "3",
            "--epochs",         "50",        "--max-restarts", "0"};
  o.output_path = Path("kill.out");
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  // Wait until worker 2 is training, then kill it.
  pid_t victim = -1;
  for (Deadline d = Deadline::After(seconds(60)); victim < 0 && !d.expired();) {
    std::ifstream table(Path("kill") + "/processes.txt");
    std::string role, word, log;
    int rank;
    pid_t pid;
    while (table >> role >> rank >> word >> pid >> word >> log) {
      if (role == "worker" && rank == 2 && fs::exists(log) && fs::file_size(log) > 0) victim = pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(victim, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(victim, SIGKILL);
  const auto code = p->Wait(Deadline::After(seconds(30)));
  ASSERT_TRUE(code.has_value()) << "the launcher hung after a worker died";
  EXPECT_EQ(*code, 1);
  std::ifstream in(Path("kill.out"));
  const std::string out((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(out.find("worker:2 was killed by SIGKILL"), std::string::npos) << out;
}

// A learning rate far too large: the loss becomes NaN within a few steps. By default the job
// stops there, exits non-zero and says so in its last line; with --on-nonfinite continue it
// trains on, the servers refuse the non-finite gradients, and the summary records the run as
// diverged. The job is sync and lr 1e30 overflows the logits after the first update, so the
// NaN comes at the same step on every run: an async job at a merely large lr (50) reached a loss
// of 9e23 in 30 steps under ASan without ever becoming NaN.
TEST_F(TrainingJobTest, ADivergingJobStopsAndSaysSo) {
  const std::vector<std::string> job = {"--workers", "2",    "--mode",      "sync",
                                        "--lr",      "1e30", "--max-steps", "30"};
  EXPECT_EQ(Launch("fail", job, 120), 1);
  std::string out = last_output_;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const std::string last = out.substr(out.rfind('\n') + 1);
  EXPECT_NE(last.find("towerps-launch: worker:"), std::string::npos) << last;
  EXPECT_NE(last.find("diverged at step "), std::string::npos) << last;
  EXPECT_EQ(out.find("internal error"), std::string::npos);
  EXPECT_EQ(out.find("test accuracy ="), std::string::npos) << "a diverged job reported a result";

  std::vector<std::string> keep_going = job;
  keep_going.insert(keep_going.end(),
                    {"--on-nonfinite", "continue", "--summary-out", Path("summary.json")});
  ASSERT_EQ(Launch("continue", keep_going, 120), 0);
  std::ifstream in(Path("summary.json"));
  const std::string summary((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(summary.find("\"diverged\":true"), std::string::npos) << summary;
  EXPECT_EQ(summary.find("\"nonfinite_rejected\":0"), std::string::npos) << summary;
  // The refused gradients were the only ones the servers read for a NaN: their workers said so.
  EXPECT_EQ(summary.find("\"server_finite_checks\":0"), std::string::npos) << summary;
  // Both workers' NaN comes at the same step: the first divergence is the lower rank's.
  EXPECT_NE(summary.find("\"diverged_worker\":\"worker:0\""), std::string::npos) << summary;
  EXPECT_EQ(summary.find("\"diverged_at_step\":null"), std::string::npos) << summary;
  EXPECT_NE(last_output_.find("non-finite refused"), std::string::npos);
}

// A rate too high for the model but not for floats: the loss leaves chance, the ReLUs die and
// the outputs become constant, with the loss at ln 10 and no NaN anywhere. (Sync, so that the
// same steps run every time.) By default the job stops, exits non-zero and its last line says it
// collapsed, naming the rate each update applied; the summary says so and keeps what was
// counted. With --on-nonfinite continue it trains on, exits 0, and the summary says so too.
TEST_F(TrainingJobTest, AJobThatCollapsesToChanceStopsAndSaysSo) {
  const std::vector<std::string> job = {
      "--workers", "1",           "--mode", "sync",          "--lr",
      "0.2",       "--max-steps", "400",    "--summary-out", Path("fail.json")};
  EXPECT_EQ(Launch("fail", job, 180), 1);
  std::string out = last_output_;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const std::string last = out.substr(out.rfind('\n') + 1);
  EXPECT_NE(last.find("towerps-launch: worker:0 exited with code 1: the model collapsed to "
                      "chance at step "),
            std::string::npos)
      << last;
  EXPECT_NE(last.find("the loss of a constant guess (ln 10 = 2.3026)"), std::string::npos) << last;
  EXPECT_NE(last.find("each update applied a rate of 0.2 (--lr 0.2, --mode sync"),
            std::string::npos)
      << last;
  EXPECT_EQ(out.find("test accuracy ="), std::string::npos) << "a collapsed job reported a result";
  std::ifstream fail_in(Path("fail.json"));
  const std::string failed((std::istreambuf_iterator<char>(fail_in)), {});
  EXPECT_NE(failed.find("\"diverged\":true,\"divergence_kind\":\"collapse\""), std::string::npos)
      << failed;
  EXPECT_EQ(failed.find("\"updates_applied\":0,"), std::string::npos) << "counters zeroed";
  EXPECT_EQ(failed.find("\"examples_per_sec\":0.0,"), std::string::npos) << failed;

  std::vector<std::string> keep_going = job;
  keep_going.back() = Path("continue.json");
  keep_going.insert(keep_going.end(), {"--on-nonfinite", "continue"});
  ASSERT_EQ(Launch("continue", keep_going, 180), 0);
  EXPECT_NE(last_output_.find("the model collapsed to chance at step"), std::string::npos);
  std::ifstream in(Path("continue.json"));
  const std::string summary((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(summary.find("\"diverged\":true,\"divergence_kind\":\"collapse\""), std::string::npos)
      << summary;
  EXPECT_NE(summary.find("\"test_accuracy\":0.1"), std::string::npos) << summary;
}

// The summary says what the job was: every job option as resolved (only the mode's own), the
// rate each update applied, the worker's options as given, the transport and the version.
TEST_F(TrainingJobTest, TheSummaryRecordsTheWholeJob) {
  ASSERT_EQ(Launch("async", {"--workers", "2", "--mode", "async", "--lr", "0.1", "--max-steps",
                             "20", "--summary-out", Path("summary.json")}),
            0);
  std::ifstream in(Path("summary.json"));
  const std::string s((std::istreambuf_iterator<char>(in)), {});
  for (const char* field :
       {"\"lr\":0.1,\"lr_scaling\":\"share\",\"lr_per_update\":0.05,",
        "\"job\":{\"workers\":\"2\",\"servers\":\"1\",\"ps-replicas\":\"1\",\"mode\":\"async\","
        "\"staleness-aware-lr\":\"false\","
        "\"lr-scaling\":\"share\",",
        "\"optimizer\":\"momentum\",\"lr\":\"0.1\",", "\"lr-schedule\":\"exponential\",",
        "\"seed\":\"1\"}", "\"transport\":\"auto\"", "\"version\":\"", "\"worker_options\":[",
        "\"--summary-out\""}) {
    EXPECT_NE(s.find(field), std::string::npos) << field << " not in " << s;
  }
  // The options of other modes are not the job's.
  for (const char* absent : {"staleness_bound", "\"staleness\":", "softsync"}) {
    EXPECT_EQ(s.find(absent), std::string::npos) << absent << " in " << s;
  }
}

// An option of another mode is refused before any process starts (no run directory).
TEST_F(TrainingJobTest, AnOptionOfAnotherModeIsRefusedBeforeAnythingStarts) {
  EXPECT_EQ(Launch("foreign", {"--mode", "async", "--staleness", "5"}), 2);
  EXPECT_NE(last_output_.find("--staleness is an option of --mode ssp; this job has --mode async"),
            std::string::npos)
      << last_output_;
  EXPECT_FALSE(fs::exists(Path("foreign")));
}

TEST_F(TrainingJobTest, WorkerWhoseServerDiesExitsNamingIt) {
  // Both find the job's secret through TOWERPS_SECRET_FILE, as launched processes do.
  ASSERT_TRUE(JobSecret::Create(Path("secret")).ok());
  const std::vector<std::string> env = {"TOWERPS_SECRET_FILE=" + Path("secret")};
  SubprocessOptions so;
  so.extra_env = env;
  // Server and worker get the same job options, as a launcher would give them.
  so.argv = {TOWERPS_SERVER_BIN, "--port", "0", "--ready-file", Path("ready"), "--workers", "1",
             "--epochs",         "50"};
  so.output_path = Path("ps.out");
  auto server = Subprocess::Start(so);
  ASSERT_TRUE(server.ok());
  for (Deadline d = Deadline::After(seconds(20)); !fs::exists(Path("ready")) && !d.expired();) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string endpoint;
  std::ifstream(Path("ready")) >> endpoint;
  SubprocessOptions wo;
  wo.extra_env = env;
  wo.argv = {TOWERPS_WORKER_BIN,
             "--rank",
             "0",
             "--ps-endpoints",
             endpoint,
             "--workers",
             "1",
             "--epochs",
             "50",
             "--rpc-timeout-ms",
             "1500",
             "--log-every",
             "20"};
  wo.output_path = Path("worker.out");
  auto worker = Subprocess::Start(wo);
  ASSERT_TRUE(worker.ok());
  auto output = [&] {
    std::ifstream in(Path("worker.out"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  for (Deadline d = Deadline::After(seconds(60)); output().find("step 40") == std::string::npos;) {
    ASSERT_FALSE(d.expired()) << output();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  server->Signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const auto code = worker->Wait(Deadline::After(seconds(20)));
  ASSERT_TRUE(code.has_value()) << "the worker hung after its server died";
  EXPECT_EQ(*code, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, seconds(5));  // 1.5 s deadline + margin
  EXPECT_NE(output().find("server 0 (" + endpoint + ") did not answer"), std::string::npos)
      << output();
}

}  // namespace
}  // namespace towerps
