// Finite-difference checks, in double precision, of every reference backward op: for a random
// upstream gradient g, the backward op must give d/dx sum(g * forward(x)). The fast CPU ops are
// then checked against these references (cpu_*_test.cc), so both are tied to the definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "kernels/reference/reference_ops.h"
#include "tests/kernels/kernel_test_util.h"

namespace towerps::kernels {
namespace {

using testing::RandomFloats;
using testing::ToDouble;
using Vec = std::vector<double>;

Vec RandomVec(size_t n, std::mt19937& rng, float scale = 1.0f) {
  return ToDouble(RandomFloats(n, rng, scale));
}

// Checks analytic == d/dx_i sum(g * f(x)) by central differences at every element of x.
void ExpectGradient(const std::function<void(const Vec& x, Vec& y)>& f, Vec x, const Vec& g,
                    const Vec& analytic, double tol = 1e-6) {
  ASSERT_EQ(x.size(), analytic.size());
  const double h = 1e-6;
  Vec y(g.size());
  double max_abs = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double old = x[i];
    double lp = 0, lm = 0;
    x[i] = old + h;
    f(x, y);
    for (size_t j = 0; j < y.size(); ++j) lp += g[j] * y[j];
    x[i] = old - h;
    f(x, y);
    for (size_t j = 0; j < y.size(); ++j) lm += g[j] * y[j];
    x[i] = old;
    const double numeric = (lp - lm) / (2 * h);
    max_abs = std::max(max_abs, std::abs(numeric));
    ASSERT_NEAR(analytic[i], numeric, tol * (1 + std::abs(numeric))) << "element " << i;
  }
  EXPECT_GT(max_abs, 1e-3) << "vacuous check: the gradient is zero everywhere";
}

TEST(ReferenceGradientTest, Conv2dDataAndFilter) {
  std::mt19937 rng(1);
  for (Conv2dShape s : {Conv2dShape{.n = 2,
                       .c = 3,
                       .h = 5,
                       .w = 6,
                       .k = 2,
                       .r = 3,
                       .s = 2,
                       .stride_h = 2,
                       .stride_w = 1,
                       .pad_h = 1,
                       .pad_w = 1},
                        Conv2dShape{.n = 1, .c = 2, .h = 4, .w = 4, .k = 3, .r = 1, .s = 1}}) {
    ASSERT_TRUE(s.Validate().ok());
    const Vec x = RandomVec(s.x_size(), rng), w = RandomVec(s.w_size(), rng);
    const Vec g = RandomVec(s.y_size(), rng);
    Vec dx(s.x_size()), dw(s.w_size());
    reference::Conv2dBackwardData(s, g.data(), w.data(), dx.data());
    reference::Conv2dBackwardFilter(s, x.data(), g.data(), dw.data());
    ExpectGradient(
        [&](const Vec& xv, Vec& y) { reference::Conv2dForward(s, xv.data(), w.data(), y.data()); },
        x, g, dx);
    ExpectGradient(
        [&](const Vec& wv, Vec& y) { reference::Conv2dForward(s, x.data(), wv.data(), y.data()); },
        w, g, dw);
  }
}

TEST(ReferenceGradientTest, Pooling) {
  std::mt19937 rng(2);
  for (Pool2dShape s :
       {Pool2dShape::Same(2, 2, 5, 6, 3, 2), Pool2dShape::Valid(1, 3, 6, 5, 2, 2)}) {
    const Vec x = RandomVec(s.x_size(), rng), g = RandomVec(s.y_size(), rng);
    Vec dx(s.x_size());
    reference::MaxPoolBackward(s, x.data(), g.data(), dx.data());
    ExpectGradient(
        [&](const Vec& xv, Vec& y) { reference::MaxPoolForward(s, xv.data(), y.data()); }, x, g,
        dx);
    reference::AvgPoolBackward(s, g.data(), dx.data());
    ExpectGradient(
        [&](const Vec& xv, Vec& y) { reference::AvgPoolForward(s, xv.data(), y.data()); }, x, g,
        dx);
  }
}

TEST(ReferenceGradientTest, Lrn) {
  std::mt19937 rng(3);
  const LrnParams p{.depth_radius = 2, .bias = 1.0f, .alpha = 0.3f, .beta = 0.75f};
  const int n = 2, c = 7, hw = 3;
  const Vec x = RandomVec(n * c * hw, rng, 2.0f), g = RandomVec(n * c * hw, rng);
  Vec dx(x.size());
  reference::LrnBackward(n, c, hw, p, x.data(), g.data(), dx.data());
  ExpectGradient(
      [&](const Vec& xv, Vec& y) { reference::LrnForward(n, c, hw, p, xv.data(), y.data()); }, x, g,
      dx);
}

// Batch norm in training mode: the gradient with respect to x (through the batch statistics),
// gamma and beta.
TEST(ReferenceGradientTest, BatchNormTraining) {
  std::mt19937 rng(5);
  const int n = 3, c = 4, hw = 5;
  const double eps = 1e-3;
  const Vec x = RandomVec(n * c * hw, rng, 2.0f), g = RandomVec(n * c * hw, rng);
  const Vec gamma = RandomVec(c, rng), beta = RandomVec(c, rng);
  Vec y(x.size()), mean(c), var(c), inv_std(c), dx(x.size()), dgamma(c), dbeta(c);
  reference::BatchNormForwardTraining(n, c, hw, eps, x.data(), gamma.data(), beta.data(), y.data(),
                                      mean.data(), var.data(), inv_std.data());
  reference::BatchNormBackward(n, c, hw, x.data(), g.data(), gamma.data(), mean.data(),
                               inv_std.data(), dx.data(), dgamma.data(), dbeta.data());
  const auto forward = [&](const Vec& xv, const Vec& gv, const Vec& bv, Vec& out) {
    Vec m(c), v(c), s(c);
    reference::BatchNormForwardTraining(n, c, hw, eps, xv.data(), gv.data(), bv.data(), out.data(),
                                        m.data(), v.data(), s.data());
  };
  ExpectGradient([&](const Vec& xv, Vec& out) { forward(xv, gamma, beta, out); }, x, g, dx);
  ExpectGradient([&](const Vec& gv, Vec& out) { forward(x, gv, beta, out); }, gamma, g, dgamma);
  ExpectGradient([&](const Vec& bv, Vec& out) { forward(x, gamma, bv, out); }, beta, g, dbeta);
  // Each channel comes out with mean beta and standard deviation |gamma| (up to epsilon).
  for (int ch = 0; ch < c; ++ch) {
    double sum = 0, sq = 0;
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < hw; ++i) sum += y[(b * c + ch) * hw + i];
    const double mu = sum / (n * hw);
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < hw; ++i) sq += std::pow(y[(b * c + ch) * hw + i] - mu, 2);
    EXPECT_NEAR(mu, beta[ch], 1e-12);
    EXPECT_NEAR(std::sqrt(sq / (n * hw)), std::abs(gamma[ch]), 1e-3 * std::abs(gamma[ch]));
  }
  // The variance written out is inv_std's; inference with the batch's own statistics is the
  // training forward.
  Vec y_inf(x.size());
  for (int ch = 0; ch < c; ++ch) {
    EXPECT_NEAR(var[ch], 1 / (inv_std[ch] * inv_std[ch]) - eps, 1e-12);
  }
  reference::BatchNormForwardInference(n, c, hw, eps, x.data(), gamma.data(), beta.data(),
                                       mean.data(), var.data(), y_inf.data());
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y_inf[i], y[i], 1e-9) << i;
}

TEST(ReferenceGradientTest, GlobalAvgPool) {
  std::mt19937 rng(6);
  const int n = 2, c = 3, hw = 7;
  const Vec x = RandomVec(n * c * hw, rng), g = RandomVec(n * c, rng);
  Vec dx(x.size());
  reference::GlobalAvgPoolBackward(n, c, hw, g.data(), dx.data());
  ExpectGradient([&](const Vec& xv,
                     Vec& y) { reference::GlobalAvgPoolForward(n, c, hw, xv.data(), y.data()); },
                 x, g, dx);
}

TEST(ReferenceGradientTest, Activations) {
  std::mt19937 rng(4);
  using reference::Activation;
  for (Activation a : {Activation::kRelu, Activation::kTanh, Activation::kSigmoid}) {
    const Vec x = RandomVec(50, rng, 3.0f), g = RandomVec(50, rng);
    Vec y(50), dx(50);
    reference::ActivationForward(a, 50, x.data(), y.data());
    reference::ActivationBackward(a, 50, y.data(), g.data(), dx.data());
    ExpectGradient([&](const Vec& xv,
                       Vec& out) { reference::ActivationForward(a, 50, xv.data(), out.data()); },
                   x, g, dx);
  }
}

TEST(ReferenceGradientTest, SoftmaxCrossEntropyAndBias) {
  std::mt19937 rng(5);
  const int batch = 3, classes = 5;
  const Vec logits = RandomVec(batch * classes, rng, 3.0f);
  const std::vector<int32_t> labels = {4, 0, 2};
  Vec loss(batch), d(logits.size());
  reference::SoftmaxCrossEntropy(batch, classes, logits.data(), labels.data(), 1.0 / batch,
                                 loss.data(), d.data());
  const Vec mean_weights(batch, 1.0 / batch);  // loss = mean over the batch
  ExpectGradient(
      [&](const Vec& l, Vec& out) {
        reference::SoftmaxCrossEntropy<double>(batch, classes, l.data(), labels.data(), 1.0,
                                               out.data(), nullptr);
      },
      logits, mean_weights, d);

  // Sigmoid cross-entropy: both labels, and logits far out where a naive form overflows.
  const Vec z = {-3.1, -0.4, 0.0, 0.7, 2.5, 40.0, -40.0};
  const std::vector<int32_t> bits = {1, 0, 1, 1, 0, 0, 1};
  const int n = static_cast<int>(z.size());
  Vec zloss(n), dz(n);
  reference::SigmoidCrossEntropy(n, z.data(), bits.data(), 1.0 / n, zloss.data(), dz.data());
  EXPECT_NEAR(zloss[2], std::log(2.0), 1e-15);
  EXPECT_NEAR(zloss[5], 40.0, 1e-12);  // a confident wrong answer costs its logit
  EXPECT_NEAR(zloss[6], 40.0, 1e-12);
  ExpectGradient(
      [&](const Vec& l, Vec& out) {
        reference::SigmoidCrossEntropy<double>(n, l.data(), bits.data(), 1.0, out.data(), nullptr);
      },
      z, Vec(n, 1.0 / n), dz);

  // DLRM's dot interaction: 2 examples of 4 vectors of 3.
  const int kb = 2, kk = 4, kd = 3;
  const Vec vecs = RandomVec(kb * kk * kd, rng);
  const int kw = kd + kk * (kk - 1) / 2;
  const Vec gy = RandomVec(kb * kw, rng);
  Vec gx(vecs.size());
  reference::DotInteractionBackward(kb, kk, kd, vecs.data(), gy.data(), gx.data());
  ExpectGradient(
      [&](const Vec& v, Vec& out) {
        out.resize(kb * kw);
        reference::DotInteractionForward(kb, kk, kd, v.data(), out.data());
      },
      vecs, gy, gx);
  Vec inter(kb * kw);
  reference::DotInteractionForward(kb, kk, kd, vecs.data(), inter.data());
  EXPECT_DOUBLE_EQ(inter[0], vecs[0]);  // the first vector, then dot(v1, v0)
  EXPECT_NEAR(inter[kd], vecs[3] * vecs[0] + vecs[4] * vecs[1] + vecs[5] * vecs[2], 1e-15);

  const int outer = 2, channels = 3, inner = 4;
  const Vec bias = RandomVec(channels, rng), base = RandomVec(outer * channels * inner, rng);
  const Vec g = RandomVec(base.size(), rng);
  Vec db(channels);
  reference::BiasBackward(outer, channels, inner, g.data(), db.data());
  ExpectGradient(
      [&](const Vec& b, Vec& y) {
        y = base;
        reference::BiasAdd(outer, channels, inner, b.data(), y.data());
      },
      bias, g, db);
}

}  // namespace
}  // namespace towerps::kernels
