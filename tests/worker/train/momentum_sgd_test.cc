// MomentumSgd against the PyTorch update rule, option validation, and a short training run on
// synthetic data whose loss must fall.
#include "worker/train/momentum_sgd.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "tests/testing/status_assert.h"
#include "worker/data/synthetic.h"
#include "worker/model/zoo.h"
#include "worker/train/local_training.h"

namespace towerps::worker {
namespace {

TEST(MomentumSgdTest, FollowsThePyTorchRuleOverTwoSteps) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ModelBuilder b({1, 1, 2});
  b.Dense("fc", 2);
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(b, cpu.get(), 1));
  ASSERT_OK_AND_ASSIGN(auto sgd, MomentumSgd::Create(model.get(), cpu.get(),
                                                     {.learning_rate = 0.5f, .momentum = 0.9f}));
  const std::vector<float> x = {1.0f, 2.0f};
  const int32_t label = 1;
  ASSERT_TRUE(model->TrainStep(x.data(), &label, 1).ok());
  const float p0 = model->value(0)[0], g0 = model->gradient(0)[0];
  ASSERT_NE(g0, 0.0f);
  sgd.Step();  // v = g0; p = p0 - 0.5 g0
  EXPECT_FLOAT_EQ(model->value(0)[0], p0 - 0.5f * g0);
  ASSERT_TRUE(model->TrainStep(x.data(), &label, 1).ok());
  const float g1 = model->gradient(0)[0];
  sgd.Step();  // v = 0.9 g0 + g1
  EXPECT_FLOAT_EQ(model->value(0)[0], p0 - 0.5f * g0 - 0.5f * (0.9f * g0 + g1));
}

TEST(MomentumSgdTest, PerLayerUpdatesFromTheHookEqualAFullStep) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("cnn"));
  ASSERT_OK_AND_ASSIGN(auto a, BuildModel<float>(builder, cpu.get(), 3));
  ASSERT_OK_AND_ASSIGN(auto b, BuildModel<float>(builder, cpu.get(), 3));
  ASSERT_OK_AND_ASSIGN(auto sgd_a, MomentumSgd::Create(a.get(), cpu.get(), {}));
  ASSERT_OK_AND_ASSIGN(auto sgd_b, MomentumSgd::Create(b.get(), cpu.get(), {}));
  ASSERT_OK_AND_ASSIGN(const Dataset data,
                       MakeSyntheticDataset({.size = 16, .example_shape = {1, 28, 28}}));
  ASSERT_OK_AND_ASSIGN(
      auto batches, Batcher::Create(&data, {.batch_size = 8, .mean = {0.5f}, .stddev = {0.25f}}));
  Batch batch;
  for (int step = 0; step < 2; ++step) {
    ASSERT_TRUE(batches->Next(&batch));
    ASSERT_TRUE(a->TrainStep(batch.x.data(), batch.labels.data(), batch.size).ok());
    sgd_a.Step();
    ASSERT_TRUE(b->TrainStep(batch.x.data(), batch.labels.data(), batch.size, [&](int v) {
                   sgd_b.StepVariable(v);
                 }).ok());
  }
  for (int v = 0; v < a->num_variables(); ++v) {
    ASSERT_TRUE(std::equal(a->value(v).begin(), a->value(v).end(), b->value(v).begin()))
        << a->variables()[v].name;
  }
}

TEST(MomentumSgdTest, RejectsBadOptions) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("mlp"));
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(builder, cpu.get(), 1));
  auto r = MomentumSgd::Create(model.get(), cpu.get(), {.learning_rate = -1.0f});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("learning rate -1"), std::string::npos);
  EXPECT_FALSE(MomentumSgd::Create(model.get(), cpu.get(), {.momentum = 1.0f}).ok());
}

TEST(LocalTrainingTest, LossFallsOnSyntheticData) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({.intra_op_threads = 2}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("cnn"));
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(builder, cpu.get(), 1));
  ASSERT_OK_AND_ASSIGN(auto sgd, MomentumSgd::Create(model.get(), cpu.get(), {}));
  ASSERT_OK_AND_ASSIGN(const Dataset data,
                       MakeSyntheticDataset({.size = 512, .example_shape = {1, 28, 28}}));
  ASSERT_OK_AND_ASSIGN(
      auto batches, Batcher::Create(&data, {.batch_size = 32, .mean = {0.5f}, .stddev = {0.25f}}));
  ASSERT_OK_AND_ASSIGN(const EpochStats first, TrainEpoch(*model, sgd, *batches, 0));
  EpochStats last;
  for (int e = 1; e < 3; ++e) {
    ASSERT_OK_AND_ASSIGN(last, TrainEpoch(*model, sgd, *batches, e));
  }
  EXPECT_EQ(first.examples, 512);
  EXPECT_LT(last.mean_loss, 0.5 * first.mean_loss);
  ASSERT_OK_AND_ASSIGN(
      auto eval,
      Batcher::Create(
          &data, {.batch_size = 100, .drop_remainder = false, .mean = {0.5f}, .stddev = {0.25f}}));
  ASSERT_OK_AND_ASSIGN(const EpochStats evaluated, EvaluateAll(*model, *eval));
  EXPECT_GT(evaluated.accuracy, 0.9);
}

TEST(LocalTrainingTest, Cifar10ModelLearnsUncroppedSyntheticData) {
  // The synthetic classes are fixed random patterns, so they are learnable only without random
  // crops; this checks that the LRN/pooling/dense stack trains, not CIFAR-10 accuracy.
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({.intra_op_threads = 2}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("cifar10"));
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(builder, cpu.get(), 1));
  ASSERT_OK_AND_ASSIGN(auto sgd, MomentumSgd::Create(model.get(), cpu.get(), {}));
  ASSERT_OK_AND_ASSIGN(const Dataset data,
                       MakeSyntheticDataset({.size = 256, .example_shape = {3, 24, 24}}));
  BatcherOptions o{.batch_size = 32, .mean = {0.5f}, .stddev = {0.25f}};
  ASSERT_OK_AND_ASSIGN(auto batches, Batcher::Create(&data, o));
  ASSERT_OK_AND_ASSIGN(const EpochStats first, TrainEpoch(*model, sgd, *batches, 0));
  EpochStats last;
  for (int e = 1; e < 8; ++e) {
    ASSERT_OK_AND_ASSIGN(last, TrainEpoch(*model, sgd, *batches, e));
  }
  EXPECT_LT(last.mean_loss, 0.5 * first.mean_loss);
  EXPECT_GT(last.accuracy, 0.8) << "chance is 0.1";
}

}  // namespace
}  // namespace towerps::worker
