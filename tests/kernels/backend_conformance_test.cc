// Every op of Backend<float> on every available backend against ReferenceBackend<double>, on
// random inputs (never all zeros), with float32 tolerances. The data moves through the backend
// memory API (MemorySpace, BackendBuffer), so one test body runs on the CPU and on a GPU.
// "cpu" always runs; "gpu0" (device gpu:0) runs when TowerPS was built with CUDA and a GPU is
// visible, and is skipped, saying why, otherwise.
// The fixture is tests/kernels/backend_conformance.h; the ops at the zoo models' own shapes and
// the residual networks' ops are in model_ops_conformance_test.cc.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/kernels/backend_conformance.h"

namespace towerps::kernels {
namespace {

using testing::AllClose;
using testing::AnyNonZero;
using testing::RandomFloats;
using testing::ToDouble;

TEST_P(BackendConformanceTest, MemoryRoundTrip) {
  const auto x = RandomFloats(1000, rng_);
  ASSERT_OK_AND_ASSIGN(auto a, Put(x));
  ASSERT_OK_AND_ASSIGN(auto b, Filled(1000, 0.0f));
  backend_->Copy(a.data(), a.bytes(), b.data());
  EXPECT_EQ(Get(b), x);
  backend_->Synchronize();
}

// The overlapping copies (MemorySpace's *Async calls) are ordered with the ops around them: an
// op queued after CopyFromHostAsync sees the upload, and CopyToHostAsync (on the CUDA backend a
// second stream, ordered by an event) sees the ops queued before it. Big enough that a copy
// racing the op would see stale data.
TEST_P(BackendConformanceTest, AsyncCopiesFollowTheQueuedWork) {
  const int64_t n = int64_t{1} << 22;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  std::vector<float> up(static_cast<size_t>(n), 1.5f), down(static_cast<size_t>(n), -1.0f);
  backend_->PinHostMemory(up.data(), bytes);
  backend_->PinHostMemory(down.data(), bytes);
  ASSERT_OK_AND_ASSIGN(auto a, Filled(n, 0.0f));
  ASSERT_OK_AND_ASSIGN(auto three, Filled(n, 3.0f));
  backend_->CopyFromHostAsync(up.data(), bytes, a.data());
  backend_->Scale(n, 2.0f, a.data());               // 3
  backend_->Axpy(n, 1.0f, three.data(), a.data());  // 6
  const uint64_t ticket = backend_->CopyToHostAsync(a.data(), bytes, down.data());
  backend_->WaitCopy(ticket);
  EXPECT_EQ(down, std::vector<float>(static_cast<size_t>(n), 6.0f));
  backend_->Synchronize();
  backend_->UnpinHostMemory(up.data());
  backend_->UnpinHostMemory(down.data());
}

// MemorySpace's optional device API. A GPU copies from another GPU backend (here a second one
// on the same device, which takes the event-ordered peer path) and from itself, and reports its
// allocator's memory; host spaces do neither.
TEST_P(BackendConformanceTest, PeerCopiesAndDeviceMemoryStats) {
  auto cpu = CpuBackend::Create({.intra_op_threads = 1});
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_FALSE(backend_->CanCopyFromPeer(**cpu));
  if (backend_->host_memory()) {
    EXPECT_FALSE(backend_->CanCopyFromPeer(*backend_));
    EXPECT_FALSE(backend_->device_memory_stats().has_value());
    return;
  }
#ifdef TOWERPS_WITH_CUDA
  CudaBackendOptions o;
  o.memory.memory_fraction = 0.1;
  o.memory.allow_growth = true;
  auto other = CudaBackend::Create(o);
  ASSERT_TRUE(other.ok()) << other.status().ToString();
  ASSERT_TRUE(backend_->CanCopyFromPeer(**other));
  ASSERT_TRUE(backend_->CanCopyFromPeer(*backend_));
  const auto x = RandomFloats(1000, rng_);
  const size_t bytes = x.size() * sizeof(float);
  auto on_other = BackendBuffer<float>::Allocate(other->get(), 1000);
  ASSERT_TRUE(on_other.ok()) << on_other.status().ToString();
  (*other)->CopyFromHost(x.data(), bytes, on_other->data());
  ASSERT_OK_AND_ASSIGN(auto from_peer, Filled(1000, 0.0f));
  ASSERT_OK_AND_ASSIGN(auto from_self, Filled(1000, 0.0f));
  backend_->CopyFromPeer(**other, on_other->data(), bytes, from_peer.data());
  backend_->CopyFromPeer(*backend_, from_peer.data(), bytes, from_self.data());
  EXPECT_EQ(Get(from_peer), x);
  EXPECT_EQ(Get(from_self), x);

  const auto stats = backend_->device_memory_stats();
  ASSERT_TRUE(stats.has_value());
  EXPECT_GT(stats->peak_bytes_in_use, 0u);
  EXPECT_LE(stats->peak_bytes_in_use, stats->bytes_reserved);
  EXPECT_LE(stats->bytes_reserved, stats->limit_bytes);
#endif
}

TEST_P(BackendConformanceTest, Gemm) {
  struct Case {
    bool ta, tb;
    int m, n, k;
    float beta;
  };
  for (const Case& c : {Case{false, false, 7, 5, 3, 0.0f}, Case{true, false, 13, 9, 31, 0.0f},
                        Case{false, true, 64, 33, 17, 0.5f}, Case{true, true, 3, 70, 129, 1.0f},
                        Case{false, false, 1, 1, 300, 0.0f}}) {
    SCOPED_TRACE(::testing::Message() << "ta=" << c.ta << " tb=" << c.tb << " m=" << c.m
                                      << " n=" << c.n << " k=" << c.k << " beta=" << c.beta);
    const auto a = RandomFloats(size_t(c.m) * c.k, rng_), b = RandomFloats(size_t(c.k) * c.n, rng_);
    auto c0 = RandomFloats(size_t(c.m) * c.n, rng_);
    if (c.beta == 0.0f) c0.assign(c0.size(), std::numeric_limits<float>::quiet_NaN());
    ASSERT_OK_AND_ASSIGN(auto da, Put(a));
    ASSERT_OK_AND_ASSIGN(auto db, Put(b));
    ASSERT_OK_AND_ASSIGN(auto dc, Put(c0));
    backend_->Gemm(c.ta, c.tb, c.m, c.n, c.k, 1.5f, da.data(), db.data(), c.beta, dc.data());
    std::vector<double> want(c0.begin(), c0.end());
    if (c.beta == 0.0f) want.assign(want.size(), 0.0);
    ref_.Gemm(c.ta, c.tb, c.m, c.n, c.k, 1.5, ToDouble(a).data(), ToDouble(b).data(), c.beta,
              want.data());
    ASSERT_TRUE(AnyNonZero(want));
    EXPECT_TRUE(AllClose(Get(dc), want, 1e-4, 1e-5));
  }
}

TEST_P(BackendConformanceTest, BiasAddAndBackward) {
  struct Case {
    int outer, channels, inner;
  };
  for (const Case& c : {Case{17, 10, 1}, Case{4, 6, 49}, Case{3, 300, 1}, Case{2, 3, 1025}}) {
    SCOPED_TRACE(::testing::Message() << c.outer << "x" << c.channels << "x" << c.inner);
    const int64_t n = int64_t{c.outer} * c.channels * c.inner;
    const auto y0 = RandomFloats(n, rng_), bias = RandomFloats(c.channels, rng_);
    ASSERT_OK_AND_ASSIGN(auto dy, Put(y0));
    ASSERT_OK_AND_ASSIGN(auto dbias, Put(bias));
    backend_->BiasAdd(c.outer, c.channels, c.inner, dbias.data(), dy.data());
    auto want = ToDouble(y0);
    ref_.BiasAdd(c.outer, c.channels, c.inner, ToDouble(bias).data(), want.data());
    EXPECT_TRUE(AllClose(Get(dy), want, 1e-6, 1e-7)) << "bias add";

    ASSERT_OK_AND_ASSIGN(auto grad, Put(y0));
    ASSERT_OK_AND_ASSIGN(auto db, Filled(c.channels, 9.0f));
    backend_->BiasBackward(c.outer, c.channels, c.inner, grad.data(), db.data());
    std::vector<double> db_want(c.channels);
    ref_.BiasBackward(c.outer, c.channels, c.inner, ToDouble(y0).data(), db_want.data());
    EXPECT_TRUE(AllClose(Get(db), db_want, 1e-4, 1e-5)) << "bias backward";
  }
}

TEST_P(BackendConformanceTest, Conv2dForwardAndBackward) {
  for (const Conv2dShape& s :
       {Conv(2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1),     // 'same' 3x3
        Conv(1, 1, 28, 28, 32, 3, 3, 1, 1, 0, 0),  // the cnn model's first layer
        Conv(3, 5, 11, 7, 6, 3, 3, 2, 2, 1, 1),    // stride 2, non-square input
        Conv(2, 4, 9, 12, 3, 5, 3, 2, 1, 2, 1),    // non-square kernel, stride and padding
        Conv(2, 8, 6, 6, 5, 1, 1, 1, 1, 0, 0),     // 1x1
        Conv(1, 3, 16, 16, 8, 5, 5, 1, 1, 2, 2),   // the cifar10 model's 5x5
        Conv(5, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1)}) {  // the first with another batch: a new plan
    SCOPED_TRACE(::testing::Message()
                 << "n=" << s.n << " c=" << s.c << " " << s.h << "x" << s.w << " k=" << s.k << " "
                 << s.r << "x" << s.s << " stride " << s.stride_h << "x" << s.stride_w << " pad "
                 << s.pad_h << "x" << s.pad_w);
    ASSERT_TRUE(s.Validate().ok());
    if (GetParam() == "cpu_onednn") {
      EXPECT_TRUE(backend_->Conv2dPlan(s).starts_with("onednn ")) << backend_->Conv2dPlan(s);
    }
    const auto x = RandomFloats(s.x_size(), rng_), w = RandomFloats(s.w_size(), rng_),
               dy = RandomFloats(s.y_size(), rng_);
    ASSERT_OK_AND_ASSIGN(auto dx_buf, Put(x));
    ASSERT_OK_AND_ASSIGN(auto w_buf, Put(w));
    ASSERT_OK_AND_ASSIGN(auto dy_buf, Put(dy));
    ASSERT_OK_AND_ASSIGN(auto y, Filled(s.y_size(), 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dx, Filled(s.x_size(), 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dw, Filled(s.w_size(), 9.0f));
    backend_->Conv2dForward(s, dx_buf.data(), w_buf.data(), y.data());
    backend_->Conv2dBackwardData(s, dy_buf.data(), w_buf.data(), dx.data());
    backend_->Conv2dBackwardFilter(s, dx_buf.data(), dy_buf.data(), dw.data());
    std::vector<double> y_ref(s.y_size()), dx_ref(s.x_size()), dw_ref(s.w_size());
    ref_.Conv2dForward(s, ToDouble(x).data(), ToDouble(w).data(), y_ref.data());
    ref_.Conv2dBackwardData(s, ToDouble(dy).data(), ToDouble(w).data(), dx_ref.data());
    ref_.Conv2dBackwardFilter(s, ToDouble(x).data(), ToDouble(dy).data(), dw_ref.data());
    ASSERT_TRUE(AnyNonZero(y_ref) && AnyNonZero(dx_ref) && AnyNonZero(dw_ref));
    // cuDNN may pick Winograd or FFT algorithms, whose float32 error is about 1e-5 of the
    // largest output rather than of each element: the absolute part scales with the largest.
    // A layout or padding mistake is off by the size of the values, far beyond this.
    EXPECT_TRUE(AllClose(Get(y), y_ref, 1e-4, 5e-5)) << "forward";
    EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-4, 5e-5)) << "backward data";
    EXPECT_TRUE(AllClose(Get(dw), dw_ref, 1e-4, 5e-5)) << "backward filter";
    // Reruns give the same bits (deterministic algorithms), so sync jobs are reproducible.
    ASSERT_OK_AND_ASSIGN(auto dx2, Filled(s.x_size(), 7.0f));
    ASSERT_OK_AND_ASSIGN(auto dw2, Filled(s.w_size(), 7.0f));
    backend_->Conv2dBackwardData(s, dy_buf.data(), w_buf.data(), dx2.data());
    backend_->Conv2dBackwardFilter(s, dx_buf.data(), dy_buf.data(), dw2.data());
    EXPECT_TRUE(Get(dx2) == Get(dx)) << "backward data differs between two identical calls";
    EXPECT_TRUE(Get(dw2) == Get(dw)) << "backward filter differs between two identical calls";
  }
}

TEST_P(BackendConformanceTest, Pooling) {
  for (bool ties : {false, true}) {
    for (const Pool2dShape& s :
         {Pool2dShape::Valid(2, 3, 8, 8, 2, 2), Pool2dShape::Valid(3, 2, 11, 11, 2, 2),
          Pool2dShape::Same(2, 3, 24, 24, 3, 2),  // overlapping, cifar10
          Pool2dShape::Same(1, 2, 7, 5, 3, 2),    // non-square, asymmetric padding
          Pool2dShape::Valid(1, 2, 9, 13, 3, 1),  // overlapping, stride 1
          Pool2dShape{2, 2, 10, 7, 3, 2, 2, 1, 1, 1, 5, 7},
          Pool2dShape::Valid(2, 2, 9, 10, 2, 3)}) {  // stride > window: uncovered inputs
      SCOPED_TRACE(::testing::Message()
                   << "ties=" << ties << " n=" << s.n << " c=" << s.c << " " << s.h << "x" << s.w
                   << " window " << s.window_h << "x" << s.window_w << " stride " << s.stride_h
                   << "x" << s.stride_w << " pad " << s.pad_h << "x" << s.pad_w << " out "
                   << s.out_h << "x" << s.out_w);
      ASSERT_TRUE(s.Validate().ok()) << s.Validate().ToString();
      auto x = RandomFloats(s.x_size(), rng_);
      // -1, 0, 1: ties in every window; the first maximum must take the gradient.
      if (ties) {
        for (float& v : x) v = std::round(v);
      }
      const auto dy = RandomFloats(s.y_size(), rng_);
      const auto xd = ToDouble(x), dyd = ToDouble(dy);
      ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
      ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
      ASSERT_OK_AND_ASSIGN(auto y, Filled(s.y_size(), 9.0f));
      ASSERT_OK_AND_ASSIGN(auto dx, Filled(s.x_size(), 9.0f));
      std::vector<double> y_ref(s.y_size()), dx_ref(s.x_size());

      backend_->MaxPoolForward(s, xb.data(), y.data());
      ref_.MaxPoolForward(s, xd.data(), y_ref.data());
      ASSERT_TRUE(AnyNonZero(y_ref));
      EXPECT_TRUE(AllClose(Get(y), y_ref, 0, 0)) << "max forward";
      backend_->MaxPoolBackward(s, xb.data(), dyb.data(), dx.data());
      ref_.MaxPoolBackward(s, xd.data(), dyd.data(), dx_ref.data());
      EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-6, 1e-6)) << "max backward";

      backend_->AvgPoolForward(s, xb.data(), y.data());
      ref_.AvgPoolForward(s, xd.data(), y_ref.data());
      EXPECT_TRUE(AllClose(Get(y), y_ref, 1e-5, 1e-6)) << "avg forward";
      backend_->AvgPoolBackward(s, dyb.data(), dx.data());
      ref_.AvgPoolBackward(s, dyd.data(), dx_ref.data());
      EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-5, 1e-6)) << "avg backward";
    }
  }
}

TEST_P(BackendConformanceTest, Activations) {
  const int64_t n = 5000;
  const auto x = RandomFloats(n, rng_, 4.0f), dy = RandomFloats(n, rng_);
  const auto xd = ToDouble(x), dyd = ToDouble(dy);
  using Fwd = void (Backend<float>::*)(int64_t, const float*, float*);
  using Bwd = void (Backend<float>::*)(int64_t, const float*, const float*, float*);
  using RefFwd = void (Backend<double>::*)(int64_t, const double*, double*);
  using RefBwd = void (Backend<double>::*)(int64_t, const double*, const double*, double*);
  struct Case {
    const char* name;
    Fwd fwd;
    Bwd bwd;
    RefFwd ref_fwd;
    RefBwd ref_bwd;
  };
  for (const Case& c :
       {Case{"relu", &Backend<float>::ReluForward, &Backend<float>::ReluBackward,
             &Backend<double>::ReluForward, &Backend<double>::ReluBackward},
        Case{"tanh", &Backend<float>::TanhForward, &Backend<float>::TanhBackward,
             &Backend<double>::TanhForward, &Backend<double>::TanhBackward},
        Case{"sigmoid", &Backend<float>::SigmoidForward, &Backend<float>::SigmoidBackward,
             &Backend<double>::SigmoidForward, &Backend<double>::SigmoidBackward}}) {
    SCOPED_TRACE(c.name);
    ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
    ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
    ASSERT_OK_AND_ASSIGN(auto y, Filled(n, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dx, Filled(n, 9.0f));
    (backend_.get()->*c.fwd)(n, xb.data(), y.data());
    std::vector<double> y_ref(n), dx_ref(n);
    (ref_.*c.ref_fwd)(n, xd.data(), y_ref.data());
    const auto y_got = Get(y);
    EXPECT_TRUE(AllClose(y_got, y_ref, 1e-5, 1e-6)) << "forward";
    // Backward from the backend's own y (what a layer does), against the reference on that y.
    (backend_.get()->*c.bwd)(n, y.data(), dyb.data(), dx.data());
    (ref_.*c.ref_bwd)(n, ToDouble(y_got).data(), dyd.data(), dx_ref.data());
    EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-5, 1e-6)) << "backward";
    // In place: y aliases x, dx aliases dy.
    (backend_.get()->*c.fwd)(n, xb.data(), xb.data());
    EXPECT_EQ(Get(xb), y_got) << "forward in place";
    (backend_.get()->*c.bwd)(n, y.data(), dyb.data(), dyb.data());
    EXPECT_EQ(Get(dyb), Get(dx)) << "backward in place";
  }
}

TEST_P(BackendConformanceTest, Lrn) {
  struct Case {
    int n, c, hw;
    LrnParams p;
  };
  for (const Case& c :
       {Case{2, 7, 9, {.depth_radius = 2, .bias = 1.0f, .alpha = 1e-3f, .beta = 0.75f}},
        Case{3, 16, 25, {.depth_radius = 4, .bias = 2.0f, .alpha = 0.05f, .beta = 0.75f}},
        Case{2, 20, 4, {.depth_radius = 5, .bias = 1.0f, .alpha = 0.1f, .beta = 0.5f}},
        // window 17 > cuDNN's 16 and beta < 0.01: our kernels on a GPU
        Case{1, 24, 6, {.depth_radius = 8, .bias = 1.0f, .alpha = 0.02f, .beta = 0.75f}},
        Case{2, 5, 3, {.depth_radius = 1, .bias = 0.5f, .alpha = 0.2f, .beta = 0.005f}},
        // cuDNN's window (7) wider than the channels (3): clipped at both ends
        Case{2, 3, 10, {.depth_radius = 3, .bias = 1.0f, .alpha = 0.1f, .beta = 0.75f}}}) {
    SCOPED_TRACE(::testing::Message() << "n=" << c.n << " c=" << c.c << " hw=" << c.hw
                                      << " r=" << c.p.depth_radius << " beta=" << c.p.beta);
    const int64_t n = int64_t{c.n} * c.c * c.hw;
    const auto x = RandomFloats(n, rng_, 2.0f), dy = RandomFloats(n, rng_);
    ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
    ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
    ASSERT_OK_AND_ASSIGN(auto y, Filled(n, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dx, Filled(n, 9.0f));
    backend_->LrnForward(c.n, c.c, c.hw, c.p, xb.data(), y.data());
    backend_->LrnBackward(c.n, c.c, c.hw, c.p, xb.data(), dyb.data(), dx.data());
    std::vector<double> y_ref(n), dx_ref(n);
    ref_.LrnForward(c.n, c.c, c.hw, c.p, ToDouble(x).data(), y_ref.data());
    ref_.LrnBackward(c.n, c.c, c.hw, c.p, ToDouble(x).data(), ToDouble(dy).data(), dx_ref.data());
    EXPECT_TRUE(AllClose(Get(y), y_ref, 1e-4, 1e-5)) << "forward";
    EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-4, 1e-5)) << "backward";
  }
}

TEST_P(BackendConformanceTest, DropoutDrawsTheReferenceMaskExactly) {
  const int64_t n = 10007;
  for (float rate : {0.0f, 0.25f, 0.5f}) {
    SCOPED_TRACE(rate);
    const auto x = RandomFloats(n, rng_), dy = RandomFloats(n, rng_);
    ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
    ASSERT_OK_AND_ASSIGN(auto dyb, Put(dy));
    ASSERT_OK_AND_ASSIGN(auto mask, Filled(n, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto y, Filled(n, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dx, Filled(n, 9.0f));
    backend_->DropoutForward(n, rate, 77, xb.data(), mask.data(), y.data());
    backend_->DropoutBackward(n, mask.data(), dyb.data(), dx.data());
    std::vector<double> mask_ref(n), y_ref(n), dx_ref(n);
    ref_.DropoutForward(n, rate, 77, ToDouble(x).data(), mask_ref.data(), y_ref.data());
    ref_.DropoutBackward(n, mask_ref.data(), ToDouble(dy).data(), dx_ref.data());
    const auto got_mask = Get(mask);
    int64_t dropped = 0;
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got_mask[i] == 0.0f, mask_ref[i] == 0.0) << "element " << i;
      dropped += got_mask[i] == 0.0f;
    }
    EXPECT_NEAR(static_cast<double>(dropped) / n, rate, 0.03);
    EXPECT_TRUE(AllClose(got_mask, mask_ref, 1e-7, 0)) << "mask";
    EXPECT_TRUE(AllClose(Get(y), y_ref, 1e-6, 1e-7)) << "forward";
    EXPECT_TRUE(AllClose(Get(dx), dx_ref, 1e-6, 1e-7)) << "backward";
    // In place, as the dropout layer may use it.
    backend_->DropoutForward(n, rate, 77, xb.data(), mask.data(), xb.data());
    EXPECT_EQ(Get(xb), Get(y));
  }
}

TEST_P(BackendConformanceTest, SoftmaxCrossEntropy) {
  struct Case {
    int classes;
    float shift;  // added to every logit: a stable implementation does not care
  };
  for (const Case& c :
       {Case{10, 0.0f}, Case{3, 0.0f}, Case{1000, 0.0f}, Case{10, 200.0f}, Case{10, -200.0f}}) {
    const int classes = c.classes;
    SCOPED_TRACE(::testing::Message() << classes << " classes, shift " << c.shift);
    const int batch = 37;
    auto logits = RandomFloats(size_t(batch) * classes, rng_, 8.0f);
    for (float& l : logits) l += c.shift;
    std::vector<int32_t> labels(batch);
    for (int32_t& l : labels) l = testing::RandomInt(rng_, 0, classes - 1);
    ASSERT_OK_AND_ASSIGN(auto lb, Put(logits));
    ASSERT_OK_AND_ASSIGN(auto lab, Put(labels));
    ASSERT_OK_AND_ASSIGN(auto loss, Filled(batch, 9.0f));
    ASSERT_OK_AND_ASSIGN(auto dl, Filled(int64_t{batch} * classes, 9.0f));
    const float scale = 1.0f / batch;
    backend_->SoftmaxCrossEntropy(batch, classes, lb.data(), lab.data(), scale, loss.data(),
                                  dl.data());
    std::vector<double> loss_ref(batch), dl_ref(size_t(batch) * classes);
    ref_.SoftmaxCrossEntropy(batch, classes, ToDouble(logits).data(), labels.data(), scale,
                             loss_ref.data(), dl_ref.data());
    ASSERT_TRUE(AnyNonZero(loss_ref));
    EXPECT_TRUE(AllClose(Get(loss), loss_ref, 1e-5, 1e-6)) << "loss";
    EXPECT_TRUE(AllClose(Get(dl), dl_ref, 1e-4, 1e-6)) << "gradient";
    // Without a gradient, and with the gradient written over the logits.
    ASSERT_OK_AND_ASSIGN(auto loss2, Filled(batch, 9.0f));
    backend_->SoftmaxCrossEntropy(batch, classes, lb.data(), lab.data(), scale, loss2.data(),
                                  nullptr);
    EXPECT_EQ(Get(loss2), Get(loss));
    backend_->SoftmaxCrossEntropy(batch, classes, lb.data(), lab.data(), scale, loss2.data(),
                                  lb.data());
    EXPECT_TRUE(AllClose(Get(lb), dl_ref, 1e-4, 1e-6)) << "gradient over the logits";
  }
}

TEST_P(BackendConformanceTest, ElementwiseHelpers) {
  const int64_t n = 4099;
  const auto x = RandomFloats(n, rng_), y0 = RandomFloats(n, rng_), z = RandomFloats(n, rng_);
  const auto xd = ToDouble(x), zd = ToDouble(z);
  ASSERT_OK_AND_ASSIGN(auto xb, Put(x));
  ASSERT_OK_AND_ASSIGN(auto zb, Put(z));

  ASSERT_OK_AND_ASSIGN(auto y, Put(y0));
  backend_->Axpy(n, -0.75f, xb.data(), y.data());
  auto want = ToDouble(y0);
  ref_.Axpy(n, -0.75, xd.data(), want.data());
  EXPECT_TRUE(AllClose(Get(y), want, 1e-6, 1e-7)) << "axpy";

  backend_->Scale(n, 3.5f, y.data());
  ref_.Scale(n, 3.5, want.data());
  EXPECT_TRUE(AllClose(Get(y), want, 1e-6, 1e-7)) << "scale";

  backend_->Fill(n, -2.25f, y.data());
  EXPECT_EQ(Get(y), std::vector<float>(n, -2.25f)) << "fill";

  // Average of three, written over the first input.
  ASSERT_OK_AND_ASSIGN(auto a0, Put(y0));
  const float* in[] = {a0.data(), xb.data(), zb.data()};
  backend_->AverageOf(3, in, n, a0.data());
  const auto y0d = ToDouble(y0);
  const double* in_ref[] = {y0d.data(), xd.data(), zd.data()};
  std::vector<double> avg(n);
  ref_.AverageOf(3, in_ref, n, avg.data());
  EXPECT_TRUE(AllClose(Get(a0), avg, 1e-6, 1e-7)) << "average of";

  ASSERT_OK_AND_ASSIGN(auto v, Put(z));
  ASSERT_OK_AND_ASSIGN(auto p, Put(y0));
  backend_->MomentumUpdate(n, 0.1f, 0.9f, 1e-3f, xb.data(), v.data(), p.data());
  auto v_ref = zd;
  auto p_ref = ToDouble(y0);
  ref_.MomentumUpdate(n, 0.1, 0.9, 1e-3, xd.data(), v_ref.data(), p_ref.data());
  EXPECT_TRUE(AllClose(Get(v), v_ref, 1e-6, 1e-7)) << "momentum velocity";
  EXPECT_TRUE(AllClose(Get(p), p_ref, 1e-6, 1e-7)) << "momentum parameters";
}

TOWERPS_INSTANTIATE_ON_EVERY_BACKEND(BackendConformanceTest);

}  // namespace
}  // namespace towerps::kernels
