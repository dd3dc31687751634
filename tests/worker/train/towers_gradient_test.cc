// Two towers at batch B each, averaged as the trainer averages them, give the gradients of one
// tower at batch 2B: the property the worker's tower averaging relies on. Real Fashion-MNIST
// batches, several SGD steps so the parameters move.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "tests/testing/status_assert.h"
#include "worker/model/zoo.h"
#include "worker/train/job_data.h"

namespace towerps::worker {
namespace {

double RelativeError(std::span<const float> a, std::span<const float> b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class TowersGradientTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TowersGradientTest, TwoTowersAtBEqualOneTowerAt2B) {
  const std::string model_name = GetParam();
  auto builder = ZooModel(model_name);
  ASSERT_TRUE(builder.ok()) << builder.status();
  DataRequest request;
  request.model_input = builder->input_shape();
  request.seed = 3;
  auto data = LoadJobData(StockRegistry(), "fashion-mnist", request, 64);
  if (!data.ok()) GTEST_SKIP() << data.status().ToString();
  auto batcher = Batcher::Create(&data->train, data->train_options);
  ASSERT_TRUE(batcher.ok()) << batcher.status();
  std::vector<std::unique_ptr<kernels::CpuBackend>> backends;
  std::vector<std::unique_ptr<Model<float>>> models;  // 0: single tower at 64; 1, 2: towers at 32
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(auto backend, kernels::CpuBackend::Create({}));
    backends.push_back(std::move(backend));
    ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(*builder, backends.back().get(), 7));
    models.push_back(std::move(model));
  }
  const int64_t example = NumElements((*batcher)->example_shape());
  Batch batch;
  (*batcher)->StartEpoch(0);
  for (int step = 0; step < 12; ++step) {
    ASSERT_TRUE((*batcher)->Next(&batch));
    ASSERT_TRUE(models[0]->TrainStep(batch.x.data(), batch.labels.data(), 64).ok());
    for (int t = 0; t < 2; ++t) {
      ASSERT_TRUE(
          models[1 + t]
              ->TrainStep(batch.x.data() + t * 32 * example, batch.labels.data() + t * 32, 32)
              .ok());
    }
    for (int v = 0; v < models[0]->num_variables(); ++v) {
      auto single = models[0]->gradient(v);
      std::vector<float> avg(single.size());
      const float* in[] = {models[1]->gradient(v).data(), models[2]->gradient(v).data()};
      kernels::cpu::AverageOf(2, in, static_cast<int64_t>(avg.size()), avg.data());
      EXPECT_LT(RelativeError(avg, single), 1e-4)
          << "step " << step << " variable " << models[0]->variables()[v].name;
      // Plain SGD from the single tower's gradient, applied to all three copies.
      for (int m = 0; m < 3; ++m) {
        auto w = models[m]->value(v);
        for (size_t i = 0; i < w.size(); ++i) w[i] -= 0.05f * single[i];
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, TowersGradientTest, ::testing::Values("mlp", "cnn"));

}  // namespace
}  // namespace towerps::worker
