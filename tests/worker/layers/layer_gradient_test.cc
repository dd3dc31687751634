// Finite-difference gradient checks, in double precision on the reference backend, of every layer:
// for a random upstream gradient g, Backward must give d/dx and d/dparam of sum(g * Forward(x)).
#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <random>

#include "kernels/reference/reference_backend.h"
#include "tests/testing/status_assert.h"
#include "worker/layers/activation.h"
#include "worker/layers/batch_norm.h"
#include "worker/layers/conv2d.h"
#include "worker/layers/dense.h"
#include "worker/layers/dropout.h"
#include "worker/layers/flatten.h"
#include "worker/layers/global_avg_pool.h"
#include "worker/layers/lrn.h"
#include "worker/layers/pool2d.h"
#include "worker/layers/residual.h"

namespace towerps::worker {
namespace {

using Vec = std::vector<double>;

Vec RandomVec(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  Vec v(n);
  for (double& x : v) {
    x = dist(rng);
    if (std::abs(x) < 1e-3) x = 0.5;
  }
  return v;
}

// sum(g * layer(x)) for a fresh layer from `make` (a callable returning Result<unique_ptr<some
// layer>>) whose parameters are `params`. NaN, and a test failure, if `make` fails.
template <typename LayerFactory>
double Objective(const LayerFactory& make, const std::vector<Vec>& params, const Vec& x,
                 const Vec& g, int batch) {
  kernels::ReferenceBackend<double> backend;
  auto made = make();
  EXPECT_TRUE(made.ok()) << made.status();
  if (!made.ok()) return std::numeric_limits<double>::quiet_NaN();
  std::unique_ptr<Layer<double>> layer = std::move(made).value();
  auto ps = layer->parameters();
  for (size_t i = 0; i < ps.size(); ++i) ps[i]->value = params[i];
  Vec y(batch * layer->output_size());
  layer->Forward(backend, batch, x.data(), y.data(), /*training=*/true);
  double sum = 0;
  for (size_t i = 0; i < y.size(); ++i) sum += g[i] * y[i];
  return sum;
}

template <typename LayerFactory>
void CheckLayer(const LayerFactory& make, int batch, uint32_t seed) {
  std::mt19937 rng(seed);
  kernels::ReferenceBackend<double> backend;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Layer<double>> layer, make());
  SCOPED_TRACE(layer->name());
  std::vector<Vec> params;
  for (auto* p : layer->parameters()) {
    p->value = RandomVec(p->value.size(), rng);  // biases too: never all zeros
    params.push_back(p->value);
  }
  Vec x = RandomVec(batch * layer->input_size(), rng);
  const Vec g = RandomVec(batch * layer->output_size(), rng);
  Vec y(g.size()), dx(x.size(), 99.0);
  layer->Forward(backend, batch, x.data(), y.data(), true);
  layer->Backward(backend, batch, x.data(), y.data(), g.data(), dx.data());

  const double h = 1e-6;
  auto check = [&](const char* what, double analytic, double& slot) {
    const double old = slot;
    slot = old + h;
    const double plus = Objective(make, params, x, g, batch);
    slot = old - h;
    const double minus = Objective(make, params, x, g, batch);
    slot = old;
    const double numeric = (plus - minus) / (2 * h);
    EXPECT_NEAR(analytic, numeric, 1e-6 * (1 + std::abs(numeric))) << what;
    return std::abs(numeric);
  };
  double largest = 0;
  for (size_t i = 0; i < x.size(); ++i) largest = std::max(largest, check("dx", dx[i], x[i]));
  EXPECT_GT(largest, 1e-3) << "vacuous: dx is zero everywhere";
  auto ps = layer->parameters();
  for (size_t p = 0; p < ps.size(); ++p) {
    SCOPED_TRACE(ps[p]->name);
    // Moving statistics are not trained: their gradient slot holds a statistic (checked below).
    if (ps[p]->kind != ps::VariableKind::kTrainable) continue;
    double biggest = 0;
    for (size_t i = 0; i < params[p].size(); ++i) {
      biggest = std::max(biggest, check("dparam", ps[p]->grad[i], params[p][i]));
    }
    EXPECT_GT(biggest, 1e-3) << "vacuous: gradient is zero everywhere";
  }
}

TEST(LayerGradientTest, Dense) {
  CheckLayer([] { return Dense<double>::Create("fc", {2, 3}, 4, Init::kHe, 1); }, 3, 1);
  CheckLayer([] { return Dense<double>::Create("fc", {5}, 1, Init::kGlorot, 1); }, 1, 2);
}

TEST(LayerGradientTest, Conv2dStridesAndPadding) {
  CheckLayer(
      [] {
        return Conv2d<double>::Create("conv", {2, 5, 6}, 3, 3, 1, Padding::kSame, Init::kHe, 1);
      },
      2, 3);
  CheckLayer(
      [] {
        return Conv2d<double>::Create("conv", {3, 7, 5}, 2, 3, 2, Padding::kValid, Init::kHe, 1);
      },
      1, 4);
}

TEST(LayerGradientTest, Pooling) {
  for (PoolKind kind : {PoolKind::kMax, PoolKind::kAverage}) {
    CheckLayer(
        [kind] {
          return Pool2d<double>::Create("pool", {2, 5, 5}, kind, 3, 2, Padding::kSame);
        },
        2, 5);
    CheckLayer(
        [kind] {
          return Pool2d<double>::Create("pool", {1, 6, 7}, kind, 2, 2, Padding::kValid);
        },
        1, 6);
  }
}

TEST(LayerGradientTest, Activations) {
  for (ActivationKind kind :
       {ActivationKind::kRelu, ActivationKind::kTanh, ActivationKind::kSigmoid}) {
    CheckLayer(
        [kind]() -> Result<std::unique_ptr<Activation<double>>> {
          return std::make_unique<Activation<double>>("act", Shape{7}, kind);
        },
        3, 7);
  }
}

TEST(LayerGradientTest, Lrn) {
  const kernels::LrnParams p{.depth_radius = 2, .bias = 1.0f, .alpha = 0.2f, .beta = 0.75f};
  CheckLayer([p] { return Lrn<double>::Create("lrn", {6, 2, 2}, p); }, 2, 8);
}

TEST(LayerGradientTest, DropoutWithAFixedMask) {
  // Each fresh layer draws the same first mask, so the objective is a fixed function of x.
  CheckLayer([] { return Dropout<double>::Create("drop", {40}, 0.4f, 9); }, 2, 9);
}

TEST(LayerGradientTest, BatchNormInTraining) {
  // Over channels of images, and over features of vectors (hw = 1).
  CheckLayer([] { return BatchNorm<double>::Create("bn", {3, 2, 3}, {.epsilon = 1e-3f}); }, 4, 10);
  CheckLayer([] { return BatchNorm<double>::Create("bn", {5}, {.epsilon = 1e-3f}); }, 6, 11);
}

TEST(LayerGradientTest, GlobalAvgPoolAndFlatten) {
  CheckLayer([] { return GlobalAvgPool<double>::Create("gap", {4, 3, 5}); }, 2, 12);
  CheckLayer(
      []() -> Result<std::unique_ptr<Flatten<double>>> {
        return std::make_unique<Flatten<double>>("flat", Shape{2, 3, 2});
      },
      3, 13);
}

// A residual block with the identity shortcut, and one with a strided 1x1 projection.
Result<std::unique_ptr<Residual<double>>> Block(bool projection) {
  const Shape in{3, 4, 4};
  const int filters = projection ? 5 : 3, stride = projection ? 2 : 1;
  Residual<double>::Chain main, shortcut;
  TOWERPS_ASSIGN_OR_RETURN(auto conv1, Conv2d<double>::Create("b/conv1", in, filters, 3, stride,
                                                              Padding::kSame, Init::kHe, 1));
  const Shape mid = conv1->output_shape();
  main.push_back(std::move(conv1));
  // tanh before the batch norm: a bias right before one has no gradient (its mean is removed).
  main.push_back(std::make_unique<Activation<double>>("b/act", mid, ActivationKind::kTanh));
  TOWERPS_ASSIGN_OR_RETURN(auto bn, BatchNorm<double>::Create("b/bn1", mid, {.epsilon = 1e-3f}));
  main.push_back(std::move(bn));
  TOWERPS_ASSIGN_OR_RETURN(auto conv2, Conv2d<double>::Create("b/conv2", mid, filters, 3, 1,
                                                              Padding::kSame, Init::kHe, 2));
  main.push_back(std::move(conv2));
  if (projection) {
    TOWERPS_ASSIGN_OR_RETURN(auto proj, Conv2d<double>::Create("b/proj", in, filters, 1, stride,
                                                               Padding::kValid, Init::kHe, 3));
    shortcut.push_back(std::move(proj));
  }
  return Residual<double>::Create("b", in, std::move(main), std::move(shortcut));
}

TEST(LayerGradientTest, ResidualBlocks) {
  CheckLayer([] { return Block(false); }, 2, 14);
  CheckLayer([] { return Block(true); }, 2, 15);
}

TEST(BatchNormTest, TrainingWritesTheBatchStatisticsAndInferenceUsesTheMovingOnes) {
  kernels::ReferenceBackend<double> backend;
  ASSERT_OK_AND_ASSIGN(auto bn, BatchNorm<double>::Create("bn", {2, 1, 3}, {.momentum = 0.8f}));
  auto ps = bn->parameters();
  ASSERT_EQ(ps.size(), 4u);
  EXPECT_EQ(ps[0]->name, "bn/gamma");
  EXPECT_EQ(ps[2]->name, "bn/moving_mean");
  EXPECT_EQ(ps[2]->kind, ps::VariableKind::kMovingAverage);
  EXPECT_EQ(ps[3]->decay, 0.8f);
  // Channel 0 holds 1..6 over the batch of 2; channel 1 holds 10 throughout.
  const Vec x = {1, 2, 3, 10, 10, 10, 4, 5, 6, 10, 10, 10};
  const Vec dy(x.size(), 1.0);
  Vec y(x.size()), dx(x.size());
  bn->Forward(backend, 2, x.data(), y.data(), /*training=*/true);
  bn->Backward(backend, 2, x.data(), y.data(), dy.data(), dx.data());
  EXPECT_DOUBLE_EQ(ps[2]->grad[0], 3.5);
  EXPECT_DOUBLE_EQ(ps[2]->grad[1], 10.0);
  EXPECT_NEAR(ps[3]->grad[0], 3.5, 1e-12) << "the unbiased variance of 1..6";
  EXPECT_NEAR(ps[3]->grad[1], 0.0, 1e-12);
  // Inference normalizes with the moving statistics: (x - 3) / sqrt(4 + eps) * gamma + beta.
  ps[2]->value = {3.0, 10.0};
  ps[3]->value = {4.0, 1.0};
  bn->Forward(backend, 2, x.data(), y.data(), /*training=*/false);
  EXPECT_NEAR(y[0], (1 - 3) / std::sqrt(4 + 1e-5), 1e-6);
  EXPECT_NEAR(y[3], 0.0, 1e-12);
}

TEST(ResidualTest, BranchesThatEndInDifferentShapesAreNamed) {
  Residual<double>::Chain main;
  ASSERT_OK_AND_ASSIGN(auto conv, Conv2d<double>::Create("blk/conv", {3, 4, 4}, 8, 3, 2,
                                                         Padding::kSame, Init::kHe, 1));
  main.push_back(std::move(conv));
  auto r = Residual<double>::Create("blk", {3, 4, 4}, std::move(main), {});
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find("'blk'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[8, 2, 2]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[3, 4, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("projection"), std::string::npos) << msg;
}

TEST(LayerCreateTest, BadArgumentsNameTheLayerAndValue) {
  auto d = Dense<float>::Create("fc9", {3}, 0, Init::kHe, 1);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("fc9"), std::string::npos);
  EXPECT_NE(d.status().message().find("units 0"), std::string::npos);
  auto c = Conv2d<float>::Create("conv7", {1, 2, 2}, 4, 5, 1, Padding::kValid, Init::kHe, 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("conv7"), std::string::npos) << c.status().message();
  auto r = Dropout<float>::Create("drop", {3}, 1.0f, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rate 1.0"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace towerps::worker
