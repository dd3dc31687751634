// The fixture of the backend conformance tests: one test body runs against every available
// backend: "cpu" always (convolutions by the measured rule: im2col at these tests' channel counts),
// "cpu_onednn" (every convolution through oneDNN) when TowerPS was built with oneDNN, and "gpu0"
// (device gpu:0) when it was built with CUDA and a GPU is visible; each skipped, saying why,
// otherwise, with the data moving through the backend memory API
// (MemorySpace, BackendBuffer) and ReferenceBackend<double> as the ground truth.
#ifndef TOWERPS_TESTS_KERNELS_BACKEND_CONFORMANCE_H_
#define TOWERPS_TESTS_KERNELS_BACKEND_CONFORMANCE_H_

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/gpu_devices.h"
#include "kernels/reference/reference_backend.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/testing/status_assert.h"
#ifdef TOWERPS_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace towerps::kernels {

class BackendConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cpu_onednn" && !cpu::ConvPlanner::Available()) {
      GTEST_SKIP() << "built without oneDNN (TOWERPS_ONEDNN=OFF or no libdnnl-dev)";
    }
    if (GetParam().starts_with("cpu")) {
      auto b =
          CpuBackend::Create({.intra_op_threads = 2,
                              .conv_algorithm = GetParam() == "cpu" ? cpu::ConvAlgorithm::kAuto
                                                                    : cpu::ConvAlgorithm::kOnednn});
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      backend_ = std::move(b).value();
      return;
    }
    std::string why;
    if (!BuiltWithCuda()) GTEST_SKIP() << "no GPU backend: " << (ListGpus(&why), why);
    if (ListGpus(&why).empty()) GTEST_SKIP() << "no GPU is present: " << why;
#ifdef TOWERPS_WITH_CUDA
    CudaBackendOptions o;
    o.device = 0;
    o.memory.memory_fraction = 0.5;
    o.memory.allow_growth = true;
    auto b = CudaBackend::Create(o);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
#endif
  }

  // Copies host data into a new buffer of the backend's memory; the allocation's error if it
  // fails (tests take the buffer with ASSERT_OK_AND_ASSIGN).
  template <typename T>
  Result<BackendBuffer<T>> Put(const std::vector<T>& host) {
    TOWERPS_ASSIGN_OR_RETURN(
        BackendBuffer<T> b,
        BackendBuffer<T>::Allocate(backend_.get(), static_cast<int64_t>(host.size())));
    backend_->CopyFromHost(host.data(), host.size() * sizeof(T), b.data());
    return b;
  }
  // A buffer of n elements filled with `value` (to catch outputs that are not written).
  Result<BackendBuffer<float>> Filled(int64_t n, float value) {
    return Put(std::vector<float>(static_cast<size_t>(n), value));
  }
  std::vector<float> Get(const BackendBuffer<float>& b) {
    std::vector<float> host(static_cast<size_t>(b.size()));
    backend_->CopyToHost(b.data(), b.bytes(), host.data());
    return host;
  }

  std::unique_ptr<Backend<float>> backend_;
  ReferenceBackend<double> ref_;
  std::mt19937 rng_{2024};
};

inline Conv2dShape Conv(int n, int c, int h, int w, int k, int r, int s, int sh, int sw, int ph,
                        int pw) {
  return Conv2dShape{n, c, h, w, k, r, s, sh, sw, ph, pw};
}

// Instantiates `Fixture`'s tests on the "cpu", "cpu_onednn" and "gpu0" backends.
#define TOWERPS_INSTANTIATE_ON_EVERY_BACKEND(Fixture)                    \
  INSTANTIATE_TEST_SUITE_P(                                              \
      Backends, Fixture, ::testing::Values("cpu", "cpu_onednn", "gpu0"), \
      [](const ::testing::TestParamInfo<std::string>& info) { return info.param; })

}  // namespace towerps::kernels

#endif  // TOWERPS_TESTS_KERNELS_BACKEND_CONFORMANCE_H_
