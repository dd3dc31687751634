// Elementwise kernels: the CPU versions against a double-precision formula, and (when a GPU is
// present) the CUDA versions against the CPU, on random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/gpu_devices.h"
#ifdef TOWERPS_WITH_CUDA
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"
#endif

namespace towerps::kernels {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TEST(ElementwiseCpuTest, AxpyAndScaleMatchFormula) {
  for (size_t n : {size_t{1}, size_t{7}, size_t{1000}}) {
    std::vector<float> x = Random(n, 1), y = Random(n, 2), y0 = y;
    cpu::Axpy(static_cast<int64_t>(n), 0.37f, x.data(), y.data());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y[i], static_cast<double>(y0[i]) + 0.37 * x[i], 1e-6);
    }
    cpu::Scale(static_cast<int64_t>(n), -1.5f, y.data());
    for (size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(y[i], -1.5 * (static_cast<double>(y0[i]) + 0.37 * x[i]), 1e-5);
    }
  }
}

TEST(ElementwiseCpuTest, AverageOfIsOrderedMean) {
  const size_t n = 513;
  std::vector<std::vector<float>> in = {Random(n, 3), Random(n, 4), Random(n, 5)};
  const float* ptrs[] = {in[0].data(), in[1].data(), in[2].data()};
  std::vector<float> out(n);
  cpu::AverageOf(3, ptrs, static_cast<int64_t>(n), out.data());
  for (size_t i = 0; i < n; ++i) {
    const float expect = ((in[0][i] + in[1][i]) + in[2][i]) * (1.0f / 3.0f);
    EXPECT_EQ(out[i], expect);  // bitwise: the order of summation is part of the contract
  }
  // Aliasing out with in[0] is allowed.
  cpu::AverageOf(3, ptrs, static_cast<int64_t>(n), in[0].data());
  EXPECT_EQ(in[0], out);
}

class ElementwiseCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (ListGpus(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
  }
};

TEST_F(ElementwiseCudaTest, AxpyAndScaleMatchCpu) {
#ifdef TOWERPS_WITH_CUDA
  for (int64_t n : {int64_t{1}, int64_t{255}, int64_t{1} << 20}) {
    std::vector<float> x = Random(n, 6), y = Random(n, 7), expect = y;
    cpu::Axpy(n, 0.5f, x.data(), expect.data());
    cpu::Scale(n, 3.0f, expect.data());
    float *dx = nullptr, *dy = nullptr;
    TOWERPS_CUDA_CHECK(cudaMalloc(&dx, n * sizeof(float)));
    TOWERPS_CUDA_CHECK(cudaMalloc(&dy, n * sizeof(float)));
    TOWERPS_CUDA_CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    TOWERPS_CUDA_CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    cuda::LaunchAxpy(n, 0.5f, dx, dy, nullptr);
    cuda::LaunchScale(n, 3.0f, dy, nullptr);
    std::vector<float> got(n, std::nanf(""));
    TOWERPS_CUDA_CHECK(cudaMemcpy(got.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    TOWERPS_CUDA_CHECK(cudaFree(dx));
    TOWERPS_CUDA_CHECK(cudaFree(dy));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], expect[i], 1e-5f * (1 + std::fabs(expect[i])));
  }
#else
  GTEST_SKIP() << "built without CUDA";
#endif
}

TEST(GpuDevicesTest, ListIsConsistentWithBuild) {
  std::string why;
  auto gpus = ListGpus(&why);
  if (!BuiltWithCuda()) {
    EXPECT_TRUE(gpus.empty());
    EXPECT_NE(why.find("without CUDA"), std::string::npos);
  }
  for (const GpuInfo& g : gpus) {
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.total_memory_bytes, 0u);
  }
  if (gpus.empty()) {
    EXPECT_FALSE(why.empty());
  }
}

}  // namespace
}  // namespace towerps::kernels
