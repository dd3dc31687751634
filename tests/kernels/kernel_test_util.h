// Helpers for the kernel tests: random inputs (never all zeros), float-vs-double comparison, and
// a fixture with a CpuBackend per thread count.
#ifndef TOWERPS_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
#define TOWERPS_TESTS_KERNELS_KERNEL_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace towerps::kernels::testing {

// Uniform in [-scale, scale), bounded away from zero so no input is accidentally all zeros.
inline std::vector<float> RandomFloats(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) {
    x = dist(rng);
    if (std::abs(x) < 1e-3f * scale) x = 0.5f * scale;
  }
  return v;
}

inline std::vector<double> ToDouble(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

inline int RandomInt(std::mt19937& rng, int lo, int hi) {  // inclusive
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

// Every element within atol + rtol * |expected|, where atol scales with the largest |expected|.
inline ::testing::AssertionResult AllClose(const std::vector<float>& got,
                                           const std::vector<double>& want, double rtol = 1e-4,
                                           double atol_rel = 1e-5) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs expected " << want.size();
  }
  double max_abs = 0;
  for (double w : want) max_abs = std::max(max_abs, std::abs(w));
  const double atol = atol_rel * std::max(1.0, max_abs);
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]))) {
      return ::testing::AssertionFailure()
             << "element " << i << ": got " << got[i] << ", expected " << want[i] << " (atol "
             << atol << ", rtol " << rtol << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

// Guards against vacuous comparisons: at least one element is clearly non-zero.
inline bool AnyNonZero(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::abs(x) > 1e-6; });
}

// A CpuBackend with GetParam() intra-op threads, for the CPU suites run at several counts.
class CpuBackendPerThreadCount : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    auto b = CpuBackend::Create({.intra_op_threads = GetParam()});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
  }
  std::unique_ptr<CpuBackend> backend_;
};

}  // namespace towerps::kernels::testing

#endif  // TOWERPS_TESTS_KERNELS_KERNEL_TEST_UTIL_H_
