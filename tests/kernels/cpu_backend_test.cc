// CpuBackend dense algebra, bias, activations, dropout, softmax cross-entropy and elementwise ops
// against the double-precision reference on random shapes (odd sizes, batch 1, all transposes).
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

using CpuBackendTest = testing::CpuBackendPerThreadCount;

TEST_P(CpuBackendTest, GemmAllTransposesRandomShapes) {
  std::mt19937 rng(3 + GetParam());
  for (int trial = 0; trial < 48; ++trial) {
    const bool ta = trial & 1, tb = trial & 2;
    // Mostly small odd shapes; every 8th is large enough to take the parallel path.
    const bool big = trial % 8 == 7;
    const int m = big ? RandomInt(rng, 60, 130) : RandomInt(rng, 1, 17);
    const int n = big ? RandomInt(rng, 60, 300) : RandomInt(rng, 1, 17);
    const int k = big ? RandomInt(rng, 30, 200) : RandomInt(rng, 1, 17);
    const float alpha = trial % 3 == 0 ? 1.0f : 0.7f, beta = trial % 4 < 2 ? 0.0f : -0.5f;
    SCOPED_TRACE(::testing::Message() << "ta=" << ta << " tb=" << tb << " m=" << m << " n=" << n
                                      << " k=" << k << " beta=" << beta);
    const auto a = RandomFloats(int64_t{m} * k, rng), b = RandomFloats(int64_t{k} * n, rng);
    auto c = RandomFloats(int64_t{m} * n, rng);
    auto c_ref = ToDouble(c);
    backend_->Gemm(ta, tb, m, n, k, alpha, a.data(), b.data(), beta, c.data());
    reference::Gemm<double>(ta, tb, m, n, k, alpha, ToDouble(a).data(), ToDouble(b).data(), beta,
                            c_ref.data());
    ASSERT_TRUE(AnyNonZero(c_ref));
    EXPECT_TRUE(AllClose(c, c_ref));
  }
}

TEST_P(CpuBackendTest, BiasAddAndBackward) {
  std::mt19937 rng(4);
  for (auto [outer, channels, inner] : {std::tuple{1, 10, 1}, std::tuple{7, 3, 13},
                                        std::tuple{64, 128, 1}, std::tuple{2, 5, 121}}) {
    const int64_t size = int64_t{outer} * channels * inner;
    const auto bias = RandomFloats(channels, rng), dy = RandomFloats(size, rng);
    auto y = RandomFloats(size, rng);
    auto y_ref = ToDouble(y);
    backend_->BiasAdd(outer, channels, inner, bias.data(), y.data());
    reference::BiasAdd<double>(outer, channels, inner, ToDouble(bias).data(), y_ref.data());
    EXPECT_TRUE(AllClose(y, y_ref));
    std::vector<float> db(channels, 5.0f);
    std::vector<double> db_ref(channels);
    backend_->BiasBackward(outer, channels, inner, dy.data(), db.data());
    reference::BiasBackward<double>(outer, channels, inner, ToDouble(dy).data(), db_ref.data());
    EXPECT_TRUE(AllClose(db, db_ref));
  }
}

TEST_P(CpuBackendTest, ActivationsMatchReference) {
  std::mt19937 rng(5);
  using reference::Activation;
  for (int64_t n : {int64_t{1}, int64_t{37}, int64_t{200001}}) {
    const auto x = RandomFloats(n, rng, 4.0f), dy = RandomFloats(n, rng);
    for (Activation a : {Activation::kRelu, Activation::kTanh, Activation::kSigmoid}) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " activation=" << static_cast<int>(a));
      std::vector<float> y(n), dx(n);
      std::vector<double> y_ref(n), dx_ref(n);
      using Fwd = void (CpuBackend::*)(int64_t, const float*, float*);
      using Bwd = void (CpuBackend::*)(int64_t, const float*, const float*, float*);
      Fwd fwd = a == Activation::kRelu   ? &CpuBackend::ReluForward
                : a == Activation::kTanh ? &CpuBackend::TanhForward
                                         : &CpuBackend::SigmoidForward;
      Bwd bwd = a == Activation::kRelu   ? &CpuBackend::ReluBackward
                : a == Activation::kTanh ? &CpuBackend::TanhBackward
                                         : &CpuBackend::SigmoidBackward;
      (backend_.get()->*fwd)(n, x.data(), y.data());
      reference::ActivationForward<double>(a, n, ToDouble(x).data(), y_ref.data());
      EXPECT_TRUE(AllClose(y, y_ref, 1e-5, 1e-6));
      (backend_.get()->*bwd)(n, y.data(), dy.data(), dx.data());
      reference::ActivationBackward<double>(a, n, ToDouble(y).data(), ToDouble(dy).data(),
                                            dx_ref.data());
      if (n > 1) {
        ASSERT_TRUE(AnyNonZero(dx_ref));
      }
      EXPECT_TRUE(AllClose(dx, dx_ref, 1e-5, 1e-6));
    }
  }
}

TEST_P(CpuBackendTest, DropoutMatchesReferenceAndRate) {
  std::mt19937 rng(6);
  const int64_t n = 100003;
  const auto x = RandomFloats(n, rng), dy = RandomFloats(n, rng);
  std::vector<float> mask(n), y(n), dx(n);
  std::vector<double> mask_ref(n), y_ref(n);
  backend_->DropoutForward(n, 0.3f, 42, x.data(), mask.data(), y.data());
  reference::DropoutForward<double>(n, 0.3f, 42, ToDouble(x).data(), mask_ref.data(), y_ref.data());
  EXPECT_TRUE(AllClose(mask, mask_ref, 1e-6, 0));
  EXPECT_TRUE(AllClose(y, y_ref, 1e-6, 1e-7));
  int64_t dropped = 0;
  for (float m : mask) dropped += m == 0.0f;
  EXPECT_NEAR(static_cast<double>(dropped) / n, 0.3, 0.01);
  backend_->DropoutBackward(n, mask.data(), dy.data(), dx.data());
  for (int64_t i = 0; i < n; i += 997) EXPECT_FLOAT_EQ(dx[i], dy[i] * mask[i]);
  // Another seed gives another mask.
  std::vector<float> mask2(n), y2(n);
  backend_->DropoutForward(n, 0.3f, 43, x.data(), mask2.data(), y2.data());
  EXPECT_NE(mask, mask2);
}

TEST_P(CpuBackendTest, SoftmaxCrossEntropyIsStableAndMatches) {
  std::mt19937 rng(8);
  for (auto [batch, classes] : {std::pair{1, 10}, std::pair{64, 10}, std::pair{5, 3}}) {
    auto logits = RandomFloats(int64_t{batch} * classes, rng, 5.0f);
    logits[0] = 80.0f;  // exp(80) overflows float: the op must subtract the max first
    std::vector<int32_t> labels(batch);
    for (auto& l : labels) l = RandomInt(rng, 0, classes - 1);
    std::vector<float> loss(batch), d(logits.size());
    std::vector<double> loss_ref(batch), d_ref(logits.size());
    const float scale = 1.0f / batch;
    backend_->SoftmaxCrossEntropy(batch, classes, logits.data(), labels.data(), scale, loss.data(),
                                  d.data());
    reference::SoftmaxCrossEntropy<double>(batch, classes, ToDouble(logits).data(), labels.data(),
                                           scale, loss_ref.data(), d_ref.data());
    EXPECT_TRUE(AllClose(loss, loss_ref, 1e-5, 1e-6));
    EXPECT_TRUE(AllClose(d, d_ref, 1e-5, 1e-6));
  }
}

TEST_P(CpuBackendTest, ElementwiseAndMomentum) {
  std::mt19937 rng(9);
  const int64_t n = 70001;
  const auto g = RandomFloats(n, rng);
  auto v = RandomFloats(n, rng), p = RandomFloats(n, rng);
  auto v_ref = ToDouble(v), p_ref = ToDouble(p);
  backend_->MomentumUpdate(n, 0.1f, 0.9f, 1e-3f, g.data(), v.data(), p.data());
  reference::MomentumUpdate<double>(n, 0.1f, 0.9f, 1e-3f, ToDouble(g).data(), v_ref.data(),
                                    p_ref.data());
  EXPECT_TRUE(AllClose(v, v_ref, 1e-5, 1e-6));
  EXPECT_TRUE(AllClose(p, p_ref, 1e-5, 1e-6));

  auto y = RandomFloats(n, rng);
  std::vector<double> y_ref(y.begin(), y.end());
  backend_->Axpy(n, -0.25f, g.data(), y.data());
  backend_->Scale(n, 3.0f, y.data());
  for (int64_t i = 0; i < n; ++i) y_ref[i] = 3.0 * (y_ref[i] - 0.25 * g[i]);
  EXPECT_TRUE(AllClose(y, y_ref, 1e-5, 1e-6));

  const float* ins[] = {g.data(), v.data(), p.data()};
  std::vector<float> avg(n);
  backend_->AverageOf(3, ins, n, avg.data());
  for (int64_t i = 0; i < n; i += 101) {
    EXPECT_EQ(avg[i], ((g[i] + v[i]) + p[i]) * (1.0f / 3.0f));
  }
  backend_->Fill(n, 2.5f, y.data());
  EXPECT_EQ(y[n - 1], 2.5f);
}

INSTANTIATE_TEST_SUITE_P(Threads, CpuBackendTest, ::testing::Values(1, 3));

TEST(CpuBackendCreateTest, RejectsBadThreadCount) {
  auto b = CpuBackend::Create({.intra_op_threads = 0});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("intra_op_threads 0"), std::string::npos);
}

}  // namespace
}  // namespace towerps::kernels
