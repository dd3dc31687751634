// CpuBackend convolution against the double-precision reference on random shapes: odd sizes,
// stride and padding combinations, 1x1 kernels, batch 1, 1 and 3 threads.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/reference_ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace towerps::kernels {
namespace {

using testing::AllClose;
using testing::AnyNonZero;
using testing::RandomFloats;
using testing::RandomInt;
using testing::ToDouble;

class CpuConvTest : public testing::CpuBackendPerThreadCount {
 protected:
  void CheckShape(const Conv2dShape& s, std::mt19937& rng) {
    SCOPED_TRACE(::testing::Message()
                 << "n=" << s.n << " c=" << s.c << " h=" << s.h << " w=" << s.w << " k=" << s.k
                 << " r=" << s.r << " s=" << s.s << " stride=" << s.stride_h << "x" << s.stride_w
                 << " pad=" << s.pad_h << "x" << s.pad_w);
    ASSERT_TRUE(s.Validate().ok()) << s.Validate().ToString();
    const auto x = RandomFloats(s.x_size(), rng), w = RandomFloats(s.w_size(), rng);
    const auto dy = RandomFloats(s.y_size(), rng);

    std::vector<float> y(s.y_size());
    std::vector<double> y_ref(s.y_size());
    backend_->Conv2dForward(s, x.data(), w.data(), y.data());
    reference::Conv2dForward(s, ToDouble(x).data(), ToDouble(w).data(), y_ref.data());
    ASSERT_TRUE(AnyNonZero(y_ref));
    EXPECT_TRUE(AllClose(y, y_ref));

    std::vector<float> dx(s.x_size(), 123.0f);  // garbage: outputs are overwritten
    std::vector<double> dx_ref(s.x_size());
    backend_->Conv2dBackwardData(s, dy.data(), w.data(), dx.data());
    reference::Conv2dBackwardData(s, ToDouble(dy).data(), ToDouble(w).data(), dx_ref.data());
    EXPECT_TRUE(AllClose(dx, dx_ref));

    std::vector<float> dw(s.w_size(), -7.0f);
    std::vector<double> dw_ref(s.w_size());
    backend_->Conv2dBackwardFilter(s, x.data(), dy.data(), dw.data());
    reference::Conv2dBackwardFilter(s, ToDouble(x).data(), ToDouble(dy).data(), dw_ref.data());
    ASSERT_TRUE(AnyNonZero(dw_ref));
    EXPECT_TRUE(AllClose(dw, dw_ref));
  }
};

TEST_P(CpuConvTest, FixedShapesIncludingBatchOneAndPointwise) {
  std::mt19937 rng(11);
  CheckShape({.n = 1, .c = 1, .h = 28, .w = 28, .k = 32, .r = 3, .s = 3}, rng);
  CheckShape({.n = 3, .c = 5, .h = 7, .w = 9, .k = 4, .r = 1, .s = 1}, rng);  // pointwise
  CheckShape({.n = 2, .c = 3, .h = 24, .w = 24, .k = 8, .r = 5, .s = 5, .pad_h = 2, .pad_w = 2},
             rng);
  CheckShape({.n = 1, .c = 2, .h = 5, .w = 5, .k = 3, .r = 5, .s = 5}, rng);  // kernel == image
}

TEST_P(CpuConvTest, RandomShapesStridesAndPadding) {
  std::mt19937 rng(1234 + GetParam());
  for (int trial = 0; trial < 40; ++trial) {
    Conv2dShape s;
    s.n = RandomInt(rng, 1, 5);
    s.c = RandomInt(rng, 1, 6);
    s.k = RandomInt(rng, 1, 7);
    s.r = RandomInt(rng, 1, 5);
    s.s = RandomInt(rng, 1, 5);
    s.h = RandomInt(rng, s.r, 13);
    s.w = RandomInt(rng, s.s, 13);
    s.stride_h = RandomInt(rng, 1, 3);
    s.stride_w = RandomInt(rng, 1, 3);
    s.pad_h = RandomInt(rng, 0, s.r - 1);
    s.pad_w = RandomInt(rng, 0, s.s - 1);
    CheckShape(s, rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, CpuConvTest, ::testing::Values(1, 3));

TEST(Conv2dShapeTest, ValidateNamesTheBadValue) {
  Conv2dShape s{.n = 1, .c = 1, .h = 4, .w = 4, .k = 1, .r = 3, .s = 3, .stride_h = 0};
  EXPECT_NE(s.Validate().message().find("stride 0x1"), std::string::npos) << s.Validate().message();
  s = {.n = 1, .c = 1, .h = 2, .w = 2, .k = 1, .r = 5, .s = 5, .pad_h = 1, .pad_w = 1};
  EXPECT_NE(s.Validate().message().find("larger than the padded input"), std::string::npos);
  s = {.n = 0};
  EXPECT_FALSE(s.Validate().ok());
}

}  // namespace
}  // namespace towerps::kernels
