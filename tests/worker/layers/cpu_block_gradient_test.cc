// A ResNet block (16 channels, a strided 3x3 and a 1x1 projection) trained in float32 on the CPU
// backend, its gradients checked against central finite differences of the same block in double
// precision on the reference backend, on both convolution paths: oneDNN (skipped in a build
// without it) and im2col + OpenBLAS. layer_gradient_test.cc checks the layers themselves in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/reference_backend.h"
#include "tests/testing/status_assert.h"
#include "worker/layers/activation.h"
#include "worker/layers/batch_norm.h"
#include "worker/layers/conv2d.h"
#include "worker/layers/residual.h"

namespace towerps::worker {
namespace {

using kernels::cpu::ConvAlgorithm;

// conv 3x3 stride 2 (16 -> 32) + batch norm + ReLU + conv 3x3 + batch norm, plus a 1x1 stride-2
// projection with its batch norm: ResNet-20's first block of a stage, on 8x8 images.
template <typename T>
Result<std::unique_ptr<Residual<T>>> StageBlock() {
  const Shape in{16, 8, 8};
  typename Residual<T>::Chain main, shortcut;
  TOWERPS_ASSIGN_OR_RETURN(
      auto conv1, Conv2d<T>::Create("b/conv1", in, 32, 3, 2, Padding::kSame, Init::kHe, 1));
  const Shape mid = conv1->output_shape();
  main.push_back(std::move(conv1));
  TOWERPS_ASSIGN_OR_RETURN(auto bn1, BatchNorm<T>::Create("b/bn1", mid, {.epsilon = 1e-3f}));
  main.push_back(std::move(bn1));
  main.push_back(std::make_unique<Activation<T>>("b/relu", mid, ActivationKind::kRelu));
  TOWERPS_ASSIGN_OR_RETURN(
      auto conv2, Conv2d<T>::Create("b/conv2", mid, 32, 3, 1, Padding::kSame, Init::kHe, 2));
  main.push_back(std::move(conv2));
  TOWERPS_ASSIGN_OR_RETURN(auto bn2, BatchNorm<T>::Create("b/bn2", mid, {.epsilon = 1e-3f}));
  main.push_back(std::move(bn2));
  TOWERPS_ASSIGN_OR_RETURN(
      auto proj, Conv2d<T>::Create("b/proj", in, 32, 1, 2, Padding::kValid, Init::kHe, 3));
  shortcut.push_back(std::move(proj));
  TOWERPS_ASSIGN_OR_RETURN(auto bnp, BatchNorm<T>::Create("b/proj_bn", mid, {.epsilon = 1e-3f}));
  shortcut.push_back(std::move(bnp));
  return Residual<T>::Create("b", in, std::move(main), std::move(shortcut));
}

class CpuBlockGradientTest : public ::testing::TestWithParam<ConvAlgorithm> {};

TEST_P(CpuBlockGradientTest, MatchesFiniteDifferencesOfTheDoubleBlock) {
  if (GetParam() == ConvAlgorithm::kOnednn && !kernels::cpu::ConvPlanner::Available()) {
    GTEST_SKIP() << "built without oneDNN";
  }
  const int batch = 3;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  ASSERT_OK_AND_ASSIGN(auto backend, kernels::CpuBackend::Create(
                                         {.intra_op_threads = 2, .conv_algorithm = GetParam()}));
  ASSERT_OK_AND_ASSIGN(auto block, StageBlock<float>());
  std::vector<std::vector<double>> params;  // the float values, exactly, for the double block
  for (auto* p : block->parameters()) {
    if (p->kind == ps::VariableKind::kTrainable) {
      for (float& v : p->value) v = dist(rng);
    }
    params.emplace_back(p->value.begin(), p->value.end());
  }
  std::vector<float> x(batch * block->input_size()), g(batch * block->output_size());
  for (float& v : x) v = dist(rng);
  for (float& v : g) v = dist(rng);
  std::vector<float> y(g.size()), dx(x.size());
  ASSERT_OK(block->Reserve(*backend, batch));
  EXPECT_NE(block->ops().find(GetParam() == ConvAlgorithm::kOnednn ? "[onednn" : "[im2col"),
            std::string::npos)
      << block->ops();
  block->Forward(*backend, batch, x.data(), y.data(), true);
  block->Backward(*backend, batch, x.data(), y.data(), g.data(), dx.data());

  // sum(g * block(x)) in double, for the block with its parameters and input as given.
  std::vector<double> xd(x.begin(), x.end());
  const std::vector<double> gd(g.begin(), g.end());
  auto objective = [&]() {
    kernels::ReferenceBackend<double> ref;
    auto made = StageBlock<double>();
    EXPECT_TRUE(made.ok());
    auto ps = (*made)->parameters();
    for (size_t i = 0; i < ps.size(); ++i) ps[i]->value = params[i];
    std::vector<double> yd(gd.size());
    (*made)->Forward(ref, batch, xd.data(), yd.data(), true);
    double sum = 0;
    for (size_t i = 0; i < yd.size(); ++i) sum += gd[i] * yd[i];
    return sum;
  };
  auto numeric = [&](double& slot) {
    const double old = slot, h = 1e-5;
    slot = old + h;
    const double plus = objective();
    slot = old - h;
    const double minus = objective();
    slot = old;
    return (plus - minus) / (2 * h);
  };
  // A sample of coordinates of dx and of each trained parameter: float32 against double, so the
  // bound is relative to the largest gradient of the tensor.
  auto check = [&](const char* what, const std::vector<float>& analytic, std::vector<double>& at) {
    SCOPED_TRACE(what);
    const float largest =
        std::abs(*std::max_element(analytic.begin(), analytic.end(),
                                   [](float a, float b) { return std::abs(a) < std::abs(b); }));
    ASSERT_GT(largest, 1e-3f) << "vacuous: the gradient is zero";
    for (size_t k = 0; k < 12; ++k) {
      const size_t i = (k * 7919) % at.size();
      EXPECT_NEAR(analytic[i], numeric(at[i]), 2e-3 * largest) << "coordinate " << i;
    }
  };
  check("dx", dx, xd);
  auto ps = block->parameters();
  for (size_t p = 0; p < ps.size(); ++p) {
    // A convolution's bias right before a batch norm has no gradient (its mean is removed).
    if (ps[p]->kind != ps::VariableKind::kTrainable || ps[p]->name.ends_with("/bias")) continue;
    check(ps[p]->name.c_str(), ps[p]->grad, params[p]);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, CpuBlockGradientTest,
                         ::testing::Values(ConvAlgorithm::kOnednn, ConvAlgorithm::kIm2col),
                         [](const ::testing::TestParamInfo<ConvAlgorithm>& info) {
                           return std::string(kernels::cpu::kConvAlgorithms.Name(info.param));
                         });

}  // namespace
}  // namespace towerps::worker
