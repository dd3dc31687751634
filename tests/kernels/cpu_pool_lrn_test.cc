// CpuBackend pooling and LRN against the double-precision reference on random shapes, including
// overlapping windows, TensorFlow 'SAME' padding, odd sizes and batch 1.
#include <gtest/gtest.h>

#include <cmath>
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

class CpuPoolLrnTest : public testing::CpuBackendPerThreadCount {
 protected:
  void CheckPool(const Pool2dShape& s, std::mt19937& rng) {
    SCOPED_TRACE(::testing::Message()
                 << "n=" << s.n << " c=" << s.c << " h=" << s.h << " w=" << s.w << " window="
                 << s.window_h << "x" << s.window_w << " stride=" << s.stride_h << "x" << s.stride_w
                 << " pad=" << s.pad_h << "x" << s.pad_w << " out=" << s.out_h << "x" << s.out_w);
    ASSERT_TRUE(s.Validate().ok()) << s.Validate().ToString();
    const auto x = RandomFloats(s.x_size(), rng), dy = RandomFloats(s.y_size(), rng);
    const auto xd = ToDouble(x), dyd = ToDouble(dy);
    std::vector<float> y(s.y_size()), dx(s.x_size(), 9.0f);
    std::vector<double> y_ref(s.y_size()), dx_ref(s.x_size());

    backend_->MaxPoolForward(s, x.data(), y.data());
    reference::MaxPoolForward(s, xd.data(), y_ref.data());
    ASSERT_TRUE(AnyNonZero(y_ref));
    EXPECT_TRUE(AllClose(y, y_ref, 0, 0)) << "max pool forward";
    backend_->MaxPoolBackward(s, x.data(), dy.data(), dx.data());
    reference::MaxPoolBackward(s, xd.data(), dyd.data(), dx_ref.data());
    EXPECT_TRUE(AllClose(dx, dx_ref, 1e-6, 1e-6)) << "max pool backward";

    backend_->AvgPoolForward(s, x.data(), y.data());
    reference::AvgPoolForward(s, xd.data(), y_ref.data());
    EXPECT_TRUE(AllClose(y, y_ref)) << "avg pool forward";
    backend_->AvgPoolBackward(s, dy.data(), dx.data());
    reference::AvgPoolBackward(s, dyd.data(), dx_ref.data());
    EXPECT_TRUE(AllClose(dx, dx_ref)) << "avg pool backward";
  }
};

TEST_P(CpuPoolLrnTest, PoolFixedShapes) {
  std::mt19937 rng(5);
  CheckPool(Pool2dShape::Valid(1, 32, 26, 26, 2, 2), rng);  // the cnn model, batch 1
  CheckPool(Pool2dShape::Valid(3, 2, 11, 11, 2, 2), rng);   // odd size drops the last row
  CheckPool(Pool2dShape::Same(2, 3, 24, 24, 3, 2), rng);    // the cifar10 model: overlapping
  CheckPool(Pool2dShape::Same(1, 2, 7, 5, 3, 2), rng);
}

TEST_P(CpuPoolLrnTest, MaxPoolTiesGoToTheFirstMaximum) {
  // After a ReLU many window entries tie at 0; every backend must route to the same one.
  std::mt19937 rng(17);
  for (const Pool2dShape& s :
       {Pool2dShape::Valid(2, 3, 26, 26, 2, 2), Pool2dShape::Valid(1, 2, 9, 11, 3, 3),
        Pool2dShape::Same(1, 2, 9, 9, 3, 2)}) {
    auto x = RandomFloats(s.x_size(), rng);
    for (float& v : x) v = std::round(v);  // -1, 0 or 1: ties everywhere
    const auto dy = RandomFloats(s.y_size(), rng);
    std::vector<float> dx(s.x_size());
    std::vector<double> dx_ref(s.x_size());
    backend_->MaxPoolBackward(s, x.data(), dy.data(), dx.data());
    reference::MaxPoolBackward(s, ToDouble(x).data(), ToDouble(dy).data(), dx_ref.data());
    EXPECT_TRUE(AllClose(dx, dx_ref, 1e-6, 1e-6));
  }
}

TEST_P(CpuPoolLrnTest, PoolRandomShapes) {
  std::mt19937 rng(99 + GetParam());
  for (int trial = 0; trial < 40; ++trial) {
    const int n = RandomInt(rng, 1, 4), c = RandomInt(rng, 1, 5);
    const int window = RandomInt(rng, 1, 4), stride = RandomInt(rng, 1, 3);
    const int h = RandomInt(rng, window, 12), w = RandomInt(rng, window, 12);
    CheckPool(trial % 2 ? Pool2dShape::Same(n, c, h, w, window, stride)
                        : Pool2dShape::Valid(n, c, h, w, window, stride),
              rng);
  }
}

TEST_P(CpuPoolLrnTest, LrnRandomShapesAndParams) {
  std::mt19937 rng(7 + GetParam());
  for (int trial = 0; trial < 20; ++trial) {
    const int n = RandomInt(rng, 1, 3), c = RandomInt(rng, 1, 12), hw = RandomInt(rng, 1, 30);
    LrnParams p;
    p.depth_radius = RandomInt(rng, 0, 5);
    p.bias = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
    p.alpha = std::uniform_real_distribution<float>(0.01f, 0.5f)(rng);
    p.beta = std::uniform_real_distribution<float>(0.3f, 1.0f)(rng);
    SCOPED_TRACE(::testing::Message()
                 << "n=" << n << " c=" << c << " hw=" << hw << " radius=" << p.depth_radius
                 << " bias=" << p.bias << " alpha=" << p.alpha << " beta=" << p.beta);
    const int64_t size = int64_t{n} * c * hw;
    const auto x = RandomFloats(size, rng, 2.0f), dy = RandomFloats(size, rng);
    std::vector<float> y(size), dx(size);
    std::vector<double> y_ref(size), dx_ref(size);
    backend_->LrnForward(n, c, hw, p, x.data(), y.data());
    reference::LrnForward(n, c, hw, p, ToDouble(x).data(), y_ref.data());
    ASSERT_TRUE(AnyNonZero(y_ref));
    EXPECT_TRUE(AllClose(y, y_ref));
    backend_->LrnBackward(n, c, hw, p, x.data(), dy.data(), dx.data());
    reference::LrnBackward(n, c, hw, p, ToDouble(x).data(), ToDouble(dy).data(), dx_ref.data());
    EXPECT_TRUE(AllClose(dx, dx_ref, 1e-4, 2e-5));
  }
}

INSTANTIATE_TEST_SUITE_P(Threads, CpuPoolLrnTest, ::testing::Values(1, 3));

TEST(Pool2dShapeTest, SameMatchesTensorFlow) {
  // TF: 24x24, window 3, stride 2, SAME -> 12x12 with padding 0 before, 1 after.
  const Pool2dShape s = Pool2dShape::Same(1, 1, 24, 24, 3, 2);
  EXPECT_EQ(s.out_h, 12);
  EXPECT_EQ(s.pad_h, 0);
  const Pool2dShape t = Pool2dShape::Same(1, 1, 5, 5, 3, 1);
  EXPECT_EQ(t.out_h, 5);
  EXPECT_EQ(t.pad_h, 1);
  EXPECT_FALSE(Pool2dShape::Valid(1, 1, 1, 1, 2, 2).Validate().ok());
}

}  // namespace
}  // namespace towerps::kernels
