// The conformance of the ops the zoo's models use, at the models' own shapes: the cifar10
// model's convolutions, LRN and pooling held to float32 exactness (1e-5 of the largest value,
// which cuDNN's FFT and Winograd algorithms miss), and ResNet-20's batch norm, global average
// pooling and add, and their convolutions (on a GPU the filter gradient is im2col and a batched
// GEMM, in one pass or several). Same fixture and backends as backend_conformance_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "tests/kernels/backend_conformance.h"

namespace towerps::kernels {
namespace {

using testing::AllClose;
using testing::RandomFloats;
using testing::ToDouble;

class ModelOpsConformanceTest : public BackendConformanceTest {};

// The largest error over the largest reference value.
double LargestError(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, largest = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::abs(got[i] - want[i]));
    largest = std::max(largest, std::abs(want[i]));
  }
  return err / largest;
}

// The cifar10 model's own convolutions, LRN and pooling, at a training batch, held to what
// float32 with direct or GEMM summation gives: 1e-5 of the largest value. (A 5x5 convolution
// through cuDNN's FFT or Winograd transforms lands near 1e-4 and fails; see
// allow_transform_algorithms.) Each op's error is printed, as the GPU verification records it.
TEST_P(ModelOpsConformanceTest, OpsAtTheCifar10ModelsShapesAreFloat32Exact) {
  const auto check = [&](const char* what, const std::vector<float>& got,
                         const std::vector<double>& want, double bound) {
    const double e = LargestError(got, want);
    std::cout << GetParam() << " " << what << ": largest error " << e << " of the largest value\n";
    EXPECT_LE(e, bound) << what;
  };
  const auto run = [&](double bound) {
    for (const Conv2dShape& s :
         {Conv(32, 3, 24, 24, 64, 5, 5, 1, 1, 2, 2), Conv(32, 64, 12, 12, 64, 5, 5, 1, 1, 2, 2)}) {
      const std::string name = s.c == 3 ? "conv1" : "conv2";
      const auto x = RandomFloats(s.x_size(), rng_), w = RandomFloats(s.w_size(), rng_),
                 dy = RandomFloats(s.y_size(), rng_);
      ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
      ASSERT_OK_AND_ASSIGN(auto wb, Put(w));
      ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
      ASSERT_OK_AND_ASSIGN(auto y, Filled(s.y_size(), 9.0f));
      ASSERT_OK_AND_ASSIGN(auto dx, Filled(s.x_size(), 9.0f));
      ASSERT_OK_AND_ASSIGN(auto dw, Filled(s.w_size(), 9.0f));
      backend_->Conv2dForward(s, xb.data(), wb.data(), y.data());
      backend_->Conv2dBackwardData(s, dyb.data(), wb.data(), dx.data());
      backend_->Conv2dBackwardFilter(s, xb.data(), dyb.data(), dw.data());
      std::vector<double> y_ref(s.y_size()), dx_ref(s.x_size()), dw_ref(s.w_size());
      ref_.Conv2dForward(s, ToDouble(x).data(), ToDouble(w).data(), y_ref.data());
      ref_.Conv2dBackwardData(s, ToDouble(dy).data(), ToDouble(w).data(), dx_ref.data());
      ref_.Conv2dBackwardFilter(s, ToDouble(x).data(), ToDouble(dy).data(), dw_ref.data());
      check((name + " forward").c_str(), Get(y), y_ref, bound);
      check((name + " backward data").c_str(), Get(dx), dx_ref, bound);
      check((name + " backward filter").c_str(), Get(dw), dw_ref, bound);
    }
  };
  run(1e-5);
  // The LRN after conv1's pooling (TensorFlow's tutorial values) and the overlapping 'same'
  // max pooling of ReLU outputs (ties at zero in many windows).
  {
    const LrnParams p{.depth_radius = 4, .bias = 1.0f, .alpha = 0.001f / 9, .beta = 0.75f};
    const int n = 32, c = 64, hw = 12 * 12;
    const auto x = RandomFloats(int64_t{n} * c * hw, rng_, 3.0f), dy = RandomFloats(x.size(), rng_);
    ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
    ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
    ASSERT_OK_AND_ASSIGN(auto y, Filled(x.size(), 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dx, Filled(x.size(), 9.0f));
    backend_->LrnForward(n, c, hw, p, xb.data(), y.data());
    backend_->LrnBackward(n, c, hw, p, xb.data(), dyb.data(), dx.data());
    std::vector<double> y_ref(x.size()), dx_ref(x.size());
    ref_.LrnForward(n, c, hw, p, ToDouble(x).data(), y_ref.data());
    ref_.LrnBackward(n, c, hw, p, ToDouble(x).data(), ToDouble(dy).data(), dx_ref.data());
    check("lrn forward", Get(y), y_ref, 1e-5);
    check("lrn backward", Get(dx), dx_ref, 1e-5);
  }
  {
    const Pool2dShape s = Pool2dShape::Same(32, 64, 24, 24, 3, 2);
    auto x = RandomFloats(s.x_size(), rng_);
    for (float& v : x) v = std::max(v, 0.0f);
    const auto dy = RandomFloats(s.y_size(), rng_);
    ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
    ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
    ASSERT_OK_AND_ASSIGN(auto y, Filled(s.y_size(), 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dx, Filled(s.x_size(), 9.0f));
    backend_->MaxPoolForward(s, xb.data(), y.data());
    backend_->MaxPoolBackward(s, xb.data(), dyb.data(), dx.data());
    std::vector<double> y_ref(s.y_size()), dx_ref(s.x_size());
    ref_.MaxPoolForward(s, ToDouble(x).data(), y_ref.data());
    ref_.MaxPoolBackward(s, ToDouble(x).data(), ToDouble(dy).data(), dx_ref.data());
    check("max pool forward", Get(y), y_ref, 0);
    check("max pool backward", Get(dx), dx_ref, 1e-6);
  }
#ifdef TOWERPS_WITH_CUDA
  // What the transform algorithms would cost in accuracy, for the record: on an H100 a 5x5
  // backward filter through them was 3e-3 off (2026-11-23), so the bound is only a sanity one.
  if (GetParam() == "gpu0") {
    CudaBackendOptions o;
    o.memory.memory_fraction = 0.2;
    o.memory.allow_growth = true;
    o.allow_transform_algorithms = true;
    ASSERT_OK_AND_ASSIGN(backend_, CudaBackend::Create(o));
    std::cout << "with allow_transform_algorithms:\n";
    run(1e-2);
  }
#endif
}

// ResNet-20's convolutions (the stem, 3x3 at 16, 32 and 64 channels, the stride-2 3x3 and 1x1
// of a stage's first block) at the batch of ModelBackendMemoryTest's one-step comparison:
// forward, data gradient and filter gradient (which the CUDA backend computes as im2col and a
// batched GEMM) held to float32 exactness like the cifar10 model's, and the same bits on a second
// call. On a GPU, again with the workspace limited so that the images take several passes, and,
// for the record, with cuDNN's deterministic filter-gradient algorithm instead.
TEST_P(ModelOpsConformanceTest, ConvolutionsAtResNet20sShapesAreFloat32Exact) {
  const std::vector<Conv2dShape> shapes = {
      Conv(8, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1),   // stem
      Conv(8, 16, 32, 32, 16, 3, 3, 1, 1, 1, 1),  // stage 1
      Conv(8, 16, 32, 32, 32, 3, 3, 2, 2, 1, 1),  // stage 2's first, stride 2
      Conv(8, 16, 32, 32, 32, 1, 1, 2, 2, 0, 0),  // its projection
      Conv(8, 32, 16, 16, 32, 3, 3, 1, 1, 1, 1),  // stage 2
      Conv(8, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1)};   // stage 3
  struct Case {
    std::vector<float> x, w, dy;
    std::vector<double> y, dx, dw;  // float64 references
  };
  std::vector<Case> cases;
  for (const Conv2dShape& s : shapes) {
    Case c{RandomFloats(s.x_size(), rng_),  RandomFloats(s.w_size(), rng_),
           RandomFloats(s.y_size(), rng_),  std::vector<double>(s.y_size()),
           std::vector<double>(s.x_size()), std::vector<double>(s.w_size())};
    ref_.Conv2dForward(s, ToDouble(c.x).data(), ToDouble(c.w).data(), c.y.data());
    ref_.Conv2dBackwardData(s, ToDouble(c.dy).data(), ToDouble(c.w).data(), c.dx.data());
    ref_.Conv2dBackwardFilter(s, ToDouble(c.x).data(), ToDouble(c.dy).data(), c.dw.data());
    cases.push_back(std::move(c));
  }
  const auto run = [&](const char* how, double filter_bound) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Conv2dShape& s = shapes[i];
      const Case& c = cases[i];
      SCOPED_TRACE(::testing::Message() << how << ": c=" << s.c << " " << s.h << "x" << s.w
                                        << " k=" << s.k << " " << s.r << "x" << s.s << " stride "
                                        << s.stride_h << " (" << backend_->Conv2dPlan(s) << ")");
      ASSERT_OK_AND_ASSIGN(auto xb, Put(c.x));
      ASSERT_OK_AND_ASSIGN(auto wb, Put(c.w));
      ASSERT_OK_AND_ASSIGN(auto dyb, Put(c.dy));
      ASSERT_OK_AND_ASSIGN(auto y, Filled(s.y_size(), 9.0f));
      ASSERT_OK_AND_ASSIGN(auto dx, Filled(s.x_size(), 9.0f));
      ASSERT_OK_AND_ASSIGN(auto dw, Filled(s.w_size(), 9.0f));
      ASSERT_OK_AND_ASSIGN(auto again, Filled(s.w_size(), 7.0f));
      backend_->Conv2dForward(s, xb.data(), wb.data(), y.data());
      backend_->Conv2dBackwardData(s, dyb.data(), wb.data(), dx.data());
      backend_->Conv2dBackwardFilter(s, xb.data(), dyb.data(), dw.data());
      backend_->Conv2dBackwardFilter(s, xb.data(), dyb.data(), again.data());
      const double ey = LargestError(Get(y), c.y), edx = LargestError(Get(dx), c.dx),
                   edw = LargestError(Get(dw), c.dw);
      std::cout << GetParam() << " " << how << " c=" << s.c << " k=" << s.k << " " << s.r << "x"
                << s.s << "/" << s.stride_h << ": largest error forward " << ey << ", data " << edx
                << ", filter " << edw << " of the largest value\n";
      EXPECT_LE(ey, 1e-5) << "forward";
      EXPECT_LE(edx, 1e-5) << "data gradient";
      EXPECT_LE(edw, filter_bound) << "filter gradient";
      EXPECT_TRUE(Get(again) == Get(dw)) << "two identical calls differ";
    }
  };
  run("default", 1e-5);
#ifdef TOWERPS_WITH_CUDA
  if (GetParam() == "gpu0") {
    CudaBackendOptions o;
    o.memory.memory_fraction = 0.2;
    o.memory.allow_growth = true;
    // Room for the partial gradients and a few images' patches: several passes.
    o.conv_workspace_limit_bytes = size_t{2} << 20;
    ASSERT_OK_AND_ASSIGN(backend_, CudaBackend::Create(o));
    run("passes", 1e-5);
    o.conv_workspace_limit_bytes = CudaBackendOptions{}.conv_workspace_limit_bytes;
    o.filter_gradient_gemm = false;
    ASSERT_OK_AND_ASSIGN(backend_, CudaBackend::Create(o));
    run("cudnn", 1e-4);  // a sanity bound: this is the record of the other path
  }
#endif
}

TEST_P(ModelOpsConformanceTest, BatchNorm) {
  struct Case {
    int n, c, hw;
  };
  // ResNet-20's shapes at a small batch, a single image, and hw = 1 (after a dense layer).
  for (const Case& k : {Case{4, 16, 32 * 32}, Case{8, 32, 16 * 16}, Case{8, 64, 8 * 8},
                        Case{1, 5, 7}, Case{6, 3, 1}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << k.n << " c=" << k.c << " hw=" << k.hw);
    const int64_t size = int64_t{k.n} * k.c * k.hw;
    const float eps = 1e-3f;
    // Values off zero with a spread of their own, as activations are.
    auto x = RandomFloats(size, rng_, 2.0f);
    for (float& v : x) v += 0.5f;
    const auto dy = RandomFloats(size, rng_), gamma = RandomFloats(k.c, rng_),
               beta = RandomFloats(k.c, rng_);
    auto var = RandomFloats(k.c, rng_);
    for (float& v : var) v = std::abs(v) + 0.1f;
    ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
    ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
    ASSERT_OK_AND_ASSIGN(auto gb, Put(gamma));
    ASSERT_OK_AND_ASSIGN(auto bb, Put(beta));
    ASSERT_OK_AND_ASSIGN(auto vb, Put(var));
    ASSERT_OK_AND_ASSIGN(auto y, Filled(size, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto mean, Filled(k.c, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto batch_var, Filled(k.c, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto inv_std, Filled(k.c, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dx, Filled(size, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dgamma, Filled(k.c, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dbeta, Filled(k.c, 9.0f));
    backend_->BatchNormForwardTraining(k.n, k.c, k.hw, eps, xb.data(), gb.data(), bb.data(),
                                       y.data(), mean.data(), batch_var.data(), inv_std.data());
    backend_->BatchNormBackward(k.n, k.c, k.hw, xb.data(), dyb.data(), gb.data(), mean.data(),
                                inv_std.data(), dx.data(), dgamma.data(), dbeta.data());
    const auto xd = ToDouble(x), dyd = ToDouble(dy), gd = ToDouble(gamma), bd = ToDouble(beta);
    std::vector<double> y_ref(size), mean_ref(k.c), var_ref(k.c), is_ref(k.c), dx_ref(size),
        dg_ref(k.c), db_ref(k.c);
    ref_.BatchNormForwardTraining(k.n, k.c, k.hw, double{eps}, xd.data(), gd.data(), bd.data(),
                                  y_ref.data(), mean_ref.data(), var_ref.data(), is_ref.data());
    ref_.BatchNormBackward(k.n, k.c, k.hw, xd.data(), dyd.data(), gd.data(), mean_ref.data(),
                           is_ref.data(), dx_ref.data(), dg_ref.data(), db_ref.data());
    EXPECT_TRUE(AllClose(Get(mean), mean_ref, 1e-5, 1e-6)) << "batch mean";
    EXPECT_TRUE(AllClose(Get(batch_var), var_ref, 1e-5, 1e-6)) << "batch variance";
    EXPECT_TRUE(AllClose(Get(inv_std), is_ref, 1e-5, 1e-6)) << "batch inverse std";
    EXPECT_TRUE(AllClose(Get(y), y_ref, 1e-4, 1e-5)) << "training forward";
    EXPECT_TRUE(AllClose(Get(dgamma), dg_ref, 1e-4, 1e-5)) << "dgamma";
    EXPECT_TRUE(AllClose(Get(dbeta), db_ref, 1e-4, 1e-5)) << "dbeta";
    // dx is a difference of sums: its error scales with the largest term, m * |dy|.
    EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-4, 1e-4)) << "backward";
    // Reruns give the same bits.
    ASSERT_OK_AND_ASSIGN(auto dx2, Filled(size, 7.0f));
    backend_->BatchNormBackward(k.n, k.c, k.hw, xb.data(), dyb.data(), gb.data(), mean.data(),
                                inv_std.data(), dx2.data(), dgamma.data(), dbeta.data());
    EXPECT_TRUE(Get(dx2) == Get(dx)) << "backward differs between two identical calls";
    // Inference with given statistics, in place.
    std::vector<double> yi_ref(size);
    ref_.BatchNormForwardInference(k.n, k.c, k.hw, double{eps}, xd.data(), gd.data(), bd.data(),
                                   ToDouble(beta).data(), ToDouble(var).data(), yi_ref.data());
    backend_->BatchNormForwardInference(k.n, k.c, k.hw, eps, xb.data(), gb.data(), bb.data(),
                                        bb.data(), vb.data(), xb.data());
    EXPECT_TRUE(AllClose(Get(xb), yi_ref, 1e-5, 1e-6)) << "inference forward, in place";
  }
}

TEST_P(ModelOpsConformanceTest, GlobalAvgPoolAndAdd) {
  const int n = 3, c = 10, hw = 49;
  const auto x = RandomFloats(int64_t{n} * c * hw, rng_), dy = RandomFloats(n * c, rng_);
  ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
  ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
  ASSERT_OK_AND_ASSIGN(auto y, Filled(n * c, 9.0f));
  ASSERT_OK_AND_ASSIGN(auto dx, Filled(x.size(), 9.0f));
  backend_->GlobalAvgPoolForward(n, c, hw, xb.data(), y.data());
  backend_->GlobalAvgPoolBackward(n, c, hw, dyb.data(), dx.data());
  std::vector<double> y_ref(n * c), dx_ref(x.size());
  ref_.GlobalAvgPoolForward(n, c, hw, ToDouble(x).data(), y_ref.data());
  ref_.GlobalAvgPoolBackward(n, c, hw, ToDouble(dy).data(), dx_ref.data());
  EXPECT_TRUE(AllClose(Get(y), y_ref, 1e-5, 1e-6)) << "global average pool forward";
  EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-6, 1e-7)) << "global average pool backward";

  const int64_t m = 5003;
  const auto a = RandomFloats(m, rng_), b = RandomFloats(m, rng_);
  ASSERT_OK_AND_ASSIGN(auto ab, Put(a));
  ASSERT_OK_AND_ASSIGN(auto bb, Put(b));
  ASSERT_OK_AND_ASSIGN(auto sum, Filled(m, 9.0f));
  backend_->Add(m, ab.data(), bb.data(), sum.data());
  std::vector<float> want(m);
  for (int64_t i = 0; i < m; ++i) want[i] = a[i] + b[i];
  EXPECT_EQ(Get(sum), want) << "add";
  backend_->Add(m, ab.data(), bb.data(), bb.data());  // in place
  EXPECT_EQ(Get(bb), want) << "add in place";
}

TOWERPS_INSTANTIATE_ON_EVERY_BACKEND(ModelOpsConformanceTest);

}  // namespace
}  // namespace towerps::kernels
