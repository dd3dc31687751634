// CpuBackend convolution against the double-precision reference on random shapes: odd sizes,
// stride and padding combinations, 1x1 kernels, batch 1, 1 and 3 threads, on both paths (im2col +
// OpenBLAS and oneDNN; the latter skipped in a build without oneDNN). Also the planner's choice.
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

using cpu::ConvAlgorithm;

// (intra-op threads, convolution algorithm)
class CpuConvTest : public ::testing::TestWithParam<std::tuple<int, ConvAlgorithm>> {
 protected:
  void SetUp() override {
    const auto [threads, algorithm] = GetParam();
    if (algorithm == ConvAlgorithm::kOnednn && !cpu::ConvPlanner::Available()) {
      GTEST_SKIP() << "built without oneDNN (TOWERPS_ONEDNN=OFF or no libdnnl-dev)";
    }
    auto b = CpuBackend::Create({.intra_op_threads = threads, .conv_algorithm = algorithm});
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    backend_ = std::move(b).value();
  }
  std::unique_ptr<CpuBackend> backend_;

  void CheckShape(const Conv2dShape& s, std::mt19937& rng) {
    SCOPED_TRACE(::testing::Message()
                 << "n=" << s.n << " c=" << s.c << " h=" << s.h << " w=" << s.w << " k=" << s.k
                 << " r=" << s.r << " s=" << s.s << " stride=" << s.stride_h << "x" << s.stride_w
                 << " pad=" << s.pad_h << "x" << s.pad_w);
    ASSERT_TRUE(s.Validate().ok()) << s.Validate().ToString();
    // The path asked for is the path taken (oneDNN refusing a shape would fall back silently).
    EXPECT_TRUE(backend_->Conv2dPlan(s).starts_with(
        std::get<1>(GetParam()) == ConvAlgorithm::kOnednn ? "onednn " : "im2col"))
        << backend_->Conv2dPlan(s);
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
  std::mt19937 rng(1234 + std::get<0>(GetParam()));
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

// ResNet-20's shapes, small batches split unevenly over the threads (5 images on 3 threads), and
// a batch smaller than the thread count.
TEST_P(CpuConvTest, ResidualNetworkShapesInUnevenPieces) {
  std::mt19937 rng(5);
  CheckShape({.n = 5, .c = 16, .h = 32, .w = 32, .k = 16, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1},
             rng);
  CheckShape({.n = 2,
              .c = 16,
              .h = 32,
              .w = 32,
              .k = 32,
              .r = 3,
              .s = 3,
              .stride_h = 2,
              .stride_w = 2,
              .pad_h = 1,
              .pad_w = 1},
             rng);
  CheckShape(
      {.n = 4, .c = 32, .h = 16, .w = 16, .k = 64, .r = 1, .s = 1, .stride_h = 2, .stride_w = 2},
      rng);
  CheckShape({.n = 7, .c = 64, .h = 8, .w = 8, .k = 64, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1},
             rng);
}

// A rerun, and a rerun on a fresh backend, give the same bits: the path and its pieces are fixed
// by the shape and the thread count.
TEST_P(CpuConvTest, RerunsAreBitIdentical) {
  std::mt19937 rng(8);
  const Conv2dShape s{
      .n = 9, .c = 16, .h = 12, .w = 12, .k = 24, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1};
  const auto x = RandomFloats(s.x_size(), rng), w = RandomFloats(s.w_size(), rng),
             dy = RandomFloats(s.y_size(), rng);
  auto run = [&](CpuBackend& b) {
    std::vector<float> out(s.y_size() + s.x_size() + s.w_size());
    b.Conv2dForward(s, x.data(), w.data(), out.data());
    b.Conv2dBackwardData(s, dy.data(), w.data(), out.data() + s.y_size());
    b.Conv2dBackwardFilter(s, x.data(), dy.data(), out.data() + s.y_size() + s.x_size());
    return out;
  };
  const auto first = run(*backend_);
  EXPECT_EQ(run(*backend_), first);
  const auto [threads, algorithm] = GetParam();
  auto fresh = CpuBackend::Create({.intra_op_threads = threads, .conv_algorithm = algorithm});
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(run(**fresh), first);
}

INSTANTIATE_TEST_SUITE_P(ThreadsAndPaths, CpuConvTest,
                         ::testing::Combine(::testing::Values(1, 3),
                                            ::testing::Values(ConvAlgorithm::kIm2col,
                                                              ConvAlgorithm::kOnednn)),
                         [](const ::testing::TestParamInfo<CpuConvTest::ParamType>& info) {
                           return std::to_string(std::get<0>(info.param)) + "_threads_" +
                                  cpu::kConvAlgorithms.Name(std::get<1>(info.param));
                         });

// The measured rule: oneDNN for kernels larger than 1x1 over at least 48 inputs (c·r·s), im2col
// for ResNet-20's stem (27) and its 1x1 projections; every shape is named as
// --log-device-placement shows it; 'onednn' is refused by a build without it.
TEST(ConvPlannerTest, ChoosesByShapeAndNamesThePath) {
  auto b = CpuBackend::Create({.intra_op_threads = 2});
  ASSERT_TRUE(b.ok());
  const Conv2dShape stem{
      .n = 8, .c = 3, .h = 32, .w = 32, .k = 16, .r = 3, .s = 3, .pad_h = 1, .pad_w = 1};
  Conv2dShape block = stem, projection = stem;
  block.c = 16;
  projection.c = 64;
  projection.r = projection.s = 1;
  projection.pad_h = projection.pad_w = 0;
  EXPECT_EQ((*b)->Conv2dPlan(stem), "im2col+sgemm");
  EXPECT_EQ((*b)->Conv2dPlan(projection), "im2col+sgemm");
  if (!cpu::ConvPlanner::Available()) {
    EXPECT_EQ((*b)->Conv2dPlan(block), "im2col+sgemm");
    auto refused = CpuBackend::Create({.conv_algorithm = ConvAlgorithm::kOnednn});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("no oneDNN"), std::string::npos)
        << refused.status().message();
    return;
  }
  EXPECT_TRUE((*b)->Conv2dPlan(block).starts_with("onednn ")) << (*b)->Conv2dPlan(block);
  auto im2col = CpuBackend::Create({.conv_algorithm = ConvAlgorithm::kIm2col});
  ASSERT_TRUE(im2col.ok());
  EXPECT_EQ((*im2col)->Conv2dPlan(block), "im2col+sgemm");
}

TEST(ConvPlannerTest, ParsesTheAlgorithmNames) {
  EXPECT_EQ(*cpu::kConvAlgorithms.Parse("onednn"), ConvAlgorithm::kOnednn);
  EXPECT_EQ(*cpu::kConvAlgorithms.Parse("im2col"), ConvAlgorithm::kIm2col);
  const auto bad = cpu::kConvAlgorithms.Parse("winograd");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--cpu-conv=winograd is not one of auto, im2col, onednn");
}

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
