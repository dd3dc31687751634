// Checkpoints that serve, through the real towerps-launch, towerps-server and towerps-worker on
// Fashion-MNIST: a finished 1-epoch job is extended with --epochs 2 (bit-identical to a 2-epoch
// job that ran straight through), --eval-only on its checkpoint prints the accuracy its summary
// gave, and --export-npz writes what numpy loads with the model's names and shapes.
#include <nlohmann/json.hpp>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

class CheckpointJobTest : public LaunchTest {
 protected:
  // towerps-launch with the mlp at 117 steps per epoch (2 workers of 256); `name` names its run
  // directory and output file, `extra` adds options. Returns the exit code.
  int Launch(const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> argv = {kLaunchBin,     "--workers", "2",
                                     "--batch-size", "256",       "--log-every",
                                     "50",           "--run-dir", (dir_ / name).string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    ShowOnFailure(name + ".out");
    Result<int> code = RunProcess(argv, dir_ / (name + ".out"), {}, seconds(300));
    return code.ok() ? *code : -1;
  }
  nlohmann::json Summary(const std::string& file) const {
    return nlohmann::json::parse(dir_.Read(file), nullptr, /*allow_exceptions=*/false);
  }
};

TEST_F(CheckpointJobTest, AFinishedJobIsExtendedEvaluatedAndExported) {
  if (!HaveFashionMnist()) GTEST_SKIP() << kNoFashionMnist;
  const std::string ckpt = (dir_ / "ckpt").string();
  ASSERT_EQ(Launch("first", {"--epochs", "1", "--checkpoint-dir", ckpt, "--summary-out",
                             (dir_ / "first.json").string()}),
            0);
  EXPECT_EQ(Summary("first.json")["epochs"], 1.0);

  // The same command with --epochs 2 resumes at step 117 and ends at epoch 2.
  ASSERT_EQ(Launch("resumed", {"--epochs", "2", "--checkpoint-dir", ckpt, "--summary-out",
                               (dir_ / "resumed.json").string(), "--final-params-out",
                               (dir_ / "resumed.bin").string()}),
            0);
  EXPECT_NE(dir_.Read("resumed.out").find("the servers hold version 117 (restored)"),
            std::string::npos);
  const nlohmann::json resumed = Summary("resumed.json");
  EXPECT_EQ(resumed["epochs"], 2.0);
  EXPECT_EQ(resumed["steps"], 234);
  EXPECT_EQ(resumed["final_versions"], nlohmann::json({234, 234}));

  // Undisturbed, the 2-epoch job ends with the same bits.
  ASSERT_EQ(
      Launch("straight", {"--epochs", "2", "--final-params-out", (dir_ / "straight.bin").string()}),
      0);
  EXPECT_EQ(dir_.Read("resumed.bin"), dir_.Read("straight.bin"));

  // A real difference is named, with both values.
  ASSERT_EQ(Launch("changed", {"--epochs", "3", "--lr", "0.1", "--checkpoint-dir", ckpt}), 1);
  EXPECT_NE(dir_.Read("changed.out").find("it was written with --lr 0.05, this job has --lr 0.1"),
            std::string::npos);

  // --eval-only prints the summary's accuracy and writes the .npz.
  const std::string npz = (dir_ / "model.npz").string();
  ASSERT_EQ(Launch("eval", {"--eval-only", "--checkpoint-dir", ckpt, "--export-npz", npz}), 0);
  char expected[64];
  std::snprintf(expected, sizeof(expected),
                "test accuracy = %.4f, test loss = ", resumed["test_accuracy"].get<double>());
  EXPECT_NE(dir_.Read("eval.out").find(expected), std::string::npos) << expected;
  EXPECT_NE(dir_.Read("eval.out").find("at version 234"), std::string::npos);
  // Another --model is refused naming the one the checkpoint holds.
  EXPECT_NE(Launch("eval_cnn", {"--eval-only", "--model", "cnn", "--checkpoint-dir", ckpt}), 0);
  EXPECT_NE(dir_.Read("eval_cnn.out")
                .find("holds the mlp model's variables, not cnn's: evaluate it with --model mlp"),
            std::string::npos)
      << dir_.Read("eval_cnn.out");

  // --bind-cores has no job to bind there: refused, not ignored.
  EXPECT_EQ(Launch("eval_bound", {"--eval-only", "--bind-cores", "--checkpoint-dir", ckpt}), 2);
  EXPECT_NE(dir_.Read("eval_bound.out").find("drop --bind-cores"), std::string::npos)
      << dir_.Read("eval_bound.out");

  // numpy reads it: names, shapes and dtype, and the values are the final parameters.
  const std::string check =
      "import numpy as np, sys\n"
      "z = np.load(sys.argv[1])\n"
      "shapes = {k: z[k].shape for k in z.files}\n"
      "want = {'fc1/kernel': (784, 256), 'fc1/bias': (256,), 'fc2/kernel': (256, 128),\n"
      "        'fc2/bias': (128,), 'logits/kernel': (128, 10), 'logits/bias': (10,),\n"
      "        'normalization/mean': (1,), 'normalization/stddev': (1,)}\n"
      "assert shapes == want, shapes\n"
      "assert all(z[k].dtype == np.float32 for k in z.files)\n"
      "assert z['normalization/mean'][0] == np.float32(0.2860), z['normalization/mean']\n"
      "assert z['normalization/stddev'][0] == np.float32(0.3530), z['normalization/stddev']\n"
      "raw = open(sys.argv[2], 'rb').read()\n"
      "pos = 0\n"
      "while pos < len(raw):\n"
      "    nl = raw.index(b'\\n', pos)\n"
      "    name, n = raw[pos:nl].decode().split()\n"
      "    a = np.frombuffer(raw[nl + 1:nl + 1 + 4 * int(n)], dtype='<f4')\n"
      "    pos = nl + 1 + 4 * int(n)\n"
      "    assert np.array_equal(a, z[name].ravel()), name\n"
      "print('npz ok')\n";
  std::ofstream(dir_ / "check.py") << check;
  ShowOnFailure("numpy.out");
  Result<int> numpy = RunProcess(
      {"/usr/bin/python3", (dir_ / "check.py").string(), npz, (dir_ / "resumed.bin").string()},
      dir_ / "numpy.out", {}, seconds(60));
  ASSERT_TRUE(numpy.ok()) << numpy.status();
  EXPECT_EQ(*numpy, 0);
  EXPECT_NE(dir_.Read("numpy.out").find("npz ok"), std::string::npos);
}

}  // namespace
}  // namespace towerps::launch_test
