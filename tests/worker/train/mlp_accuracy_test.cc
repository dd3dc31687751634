// The single-process accuracy requirement for `mlp`: Fashion-MNIST test accuracy >= 0.87 within 5
// epochs (batch 64, SGD lr 0.01 momentum 0.9). Label "slow" (a few seconds in release; not built
// under sanitizers). Skips when the dataset-fashion-mnist package is missing.
#include <gtest/gtest.h>

#include <filesystem>

#include "kernels/cpu/cpu_backend.h"
#include "tests/testing/status_assert.h"
#include "worker/data/fashion_mnist.h"
#include "worker/model/zoo.h"
#include "worker/train/local_training.h"

namespace towerps::worker {
namespace {

TEST(MlpAccuracyTest, ReachesPoint87WithinFiveEpochs) {
  if (!std::filesystem::exists(std::string(kDefaultFashionMnistDir) +
                               "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  ASSERT_OK_AND_ASSIGN(const Dataset train, LoadFashionMnist({}));
  ASSERT_OK_AND_ASSIGN(const Dataset test, LoadFashionMnist({.split = Split::kTest}));
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({.intra_op_threads = 2}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("mlp"));
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(builder, cpu.get(), 1));
  ASSERT_OK_AND_ASSIGN(auto sgd, MomentumSgd::Create(model.get(), cpu.get(), {}));
  BatcherOptions norm{.mean = {kFashionMnistMean}, .stddev = {kFashionMnistStddev}};
  BatcherOptions eval_options = norm;
  eval_options.batch_size = 1000;
  eval_options.shuffle = false;
  eval_options.drop_remainder = false;
  ASSERT_OK_AND_ASSIGN(auto batches, Batcher::Create(&train, norm));
  ASSERT_OK_AND_ASSIGN(auto eval, Batcher::Create(&test, eval_options));

  ASSERT_OK_AND_ASSIGN(const EpochStats before, EvaluateAll(*model, *eval));
  const double untrained = before.accuracy;
  EXPECT_LT(untrained, 0.3) << "an untrained model should be near chance (0.1)";
  double best = 0;
  for (int epoch = 0; epoch < 5 && best < 0.87; ++epoch) {
    ASSERT_TRUE(TrainEpoch(*model, sgd, *batches, epoch).ok());
    ASSERT_OK_AND_ASSIGN(const EpochStats s, EvaluateAll(*model, *eval));
    ASSERT_EQ(s.examples, 10000);
    best = std::max(best, s.accuracy);
    std::printf("epoch %d: test accuracy %.4f\n", epoch + 1, s.accuracy);
  }
  EXPECT_GE(best, 0.87);
}

}  // namespace
}  // namespace towerps::worker
