// The model on a backend whose memory is not host memory. Without a GPU this uses a checking
// stand-in: the CPU backend's math on buffers it hands out itself, refusing (counting) every op
// whose pointers are not inside its own allocations, so a host pointer leaking into an op
// (inputs, labels, parameters, activations) is caught. Its results must be bitwise equal to the
// model on the plain CPU backend: same math, only the memory differs. With a GPU, the same model
// on CudaBackend is compared with the CPU within float32 tolerances (skipped without one).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/gpu_devices.h"
#include "worker/model/model_builder.h"
#include "worker/model/zoo.h"
#include "worker/train/momentum_sgd.h"
#ifdef TOWERPS_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace towerps::worker {
namespace {

using kernels::Conv2dShape;
using kernels::LrnParams;
using kernels::Pool2dShape;

// Backend<float> with "device" memory: host memory it allocates itself and checks.
class CheckedDeviceBackend final : public kernels::Backend<float> {
 public:
  CheckedDeviceBackend() : cpu_(std::move(kernels::CpuBackend::Create({}).value())) {}
  ~CheckedDeviceBackend() override {
    for (auto& [p, bytes] : live_) std::free(reinterpret_cast<void*>(p));
  }

  int violations = 0;
  std::string first_violation;
  int64_t bytes_to_device = 0, bytes_to_host = 0;

  std::string name() const override { return "checked-device"; }
  bool host_memory() const override { return false; }
  Result<void*> Allocate(size_t bytes) override {
    if (bytes == 0) return static_cast<void*>(nullptr);
    void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    live_[reinterpret_cast<uintptr_t>(p)] = bytes;
    return p;
  }
  void Free(void* p) override {
    if (p == nullptr) return;
    Check(p, 1, "Free");
    live_.erase(reinterpret_cast<uintptr_t>(p));
    std::free(p);
  }
  void CopyFromHost(const void* host, size_t bytes, void* dst) override {
    Check(dst, bytes, "CopyFromHost");
    bytes_to_device += static_cast<int64_t>(bytes);
    std::memcpy(dst, host, bytes);
  }
  void CopyToHost(const void* src, size_t bytes, void* host) override {
    Check(src, bytes, "CopyToHost");
    bytes_to_host += static_cast<int64_t>(bytes);
    std::memcpy(host, src, bytes);
  }
  void Copy(const void* src, size_t bytes, void* dst) override {
    Check(src, bytes, "Copy");
    Check(dst, bytes, "Copy");
    std::memcpy(dst, src, bytes);
  }
  void Synchronize() override { Flush(); }
  // Deferred until the next op or copy (stream order), so a host buffer the model stops
  // keeping alive too early is read late (and caught by ASan).
  void CopyFromHostAsync(const void* host, size_t bytes, void* dst) override {
    Check(dst, bytes, "CopyFromHostAsync");
    bytes_to_device += static_cast<int64_t>(bytes);
    queued_.push_back({host, bytes, dst});
  }
  // Deferred until WaitCopy, so a model that reads a gradient before waiting sees stale data.
  uint64_t CopyToHostAsync(const void* src, size_t bytes, void* host) override {
    Check(src, bytes, "CopyToHostAsync");
    pending_[next_ticket_] = {src, bytes, host};
    return next_ticket_++;
  }
  void WaitCopy(uint64_t ticket) override {
    Flush();
    auto it = pending_.find(ticket);
    ASSERT_NE(it, pending_.end()) << "WaitCopy of an unknown or already waited ticket";
    bytes_to_host += static_cast<int64_t>(it->second.bytes);
    std::memcpy(it->second.host, it->second.src, it->second.bytes);
    pending_.erase(it);
  }
  size_t pending_copies() const { return pending_.size() + queued_.size(); }

  void Gemm(bool ta, bool tb, int m, int n, int k, float alpha, const float* a, const float* b,
            float beta, float* c) override {
    F(a, int64_t{m} * k, "Gemm a");
    F(b, int64_t{k} * n, "Gemm b");
    F(c, int64_t{m} * n, "Gemm c");
    cpu_->Gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void BiasAdd(int outer, int channels, int inner, const float* bias, float* y) override {
    F(bias, channels, "BiasAdd bias");
    F(y, int64_t{outer} * channels * inner, "BiasAdd y");
    cpu_->BiasAdd(outer, channels, inner, bias, y);
  }
  void BiasBackward(int outer, int channels, int inner, const float* dy, float* db) override {
    F(dy, int64_t{outer} * channels * inner, "BiasBackward dy");
    F(db, channels, "BiasBackward db");
    cpu_->BiasBackward(outer, channels, inner, dy, db);
  }
  void Conv2dForward(const Conv2dShape& s, const float* x, const float* w, float* y) override {
    F(x, s.x_size(), "conv x");
    F(w, s.w_size(), "conv w");
    F(y, s.y_size(), "conv y");
    cpu_->Conv2dForward(s, x, w, y);
  }
  void Conv2dBackwardData(const Conv2dShape& s, const float* dy, const float* w,
                          float* dx) override {
    F(dy, s.y_size(), "conv dy");
    F(w, s.w_size(), "conv w");
    F(dx, s.x_size(), "conv dx");
    cpu_->Conv2dBackwardData(s, dy, w, dx);
  }
  void Conv2dBackwardFilter(const Conv2dShape& s, const float* x, const float* dy,
                            float* dw) override {
    F(x, s.x_size(), "conv x");
    F(dy, s.y_size(), "conv dy");
    F(dw, s.w_size(), "conv dw");
    cpu_->Conv2dBackwardFilter(s, x, dy, dw);
  }
  void MaxPoolForward(const Pool2dShape& s, const float* x, float* y) override {
    F(x, s.x_size(), "pool x");
    F(y, s.y_size(), "pool y");
    cpu_->MaxPoolForward(s, x, y);
  }
  void MaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy, float* dx) override {
    F(x, s.x_size(), "pool x");
    F(dy, s.y_size(), "pool dy");
    F(dx, s.x_size(), "pool dx");
    cpu_->MaxPoolBackward(s, x, dy, dx);
  }
  void AvgPoolForward(const Pool2dShape& s, const float* x, float* y) override {
    F(x, s.x_size(), "pool x");
    F(y, s.y_size(), "pool y");
    cpu_->AvgPoolForward(s, x, y);
  }
  void AvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx) override {
    F(dy, s.y_size(), "pool dy");
    F(dx, s.x_size(), "pool dx");
    cpu_->AvgPoolBackward(s, dy, dx);
  }
  void ReluForward(int64_t n, const float* x, float* y) override {
    Unary(n, x, y);
    cpu_->ReluForward(n, x, y);
  }
  void ReluBackward(int64_t n, const float* y, const float* dy, float* dx) override {
    Binary(n, y, dy, dx);
    cpu_->ReluBackward(n, y, dy, dx);
  }
  void TanhForward(int64_t n, const float* x, float* y) override {
    Unary(n, x, y);
    cpu_->TanhForward(n, x, y);
  }
  void TanhBackward(int64_t n, const float* y, const float* dy, float* dx) override {
    Binary(n, y, dy, dx);
    cpu_->TanhBackward(n, y, dy, dx);
  }
  void SigmoidForward(int64_t n, const float* x, float* y) override {
    Unary(n, x, y);
    cpu_->SigmoidForward(n, x, y);
  }
  void SigmoidBackward(int64_t n, const float* y, const float* dy, float* dx) override {
    Binary(n, y, dy, dx);
    cpu_->SigmoidBackward(n, y, dy, dx);
  }
  void LrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y) override {
    Unary(int64_t{n} * c * hw, x, y);
    cpu_->LrnForward(n, c, hw, p, x, y);
  }
  void LrnBackward(int n, int c, int hw, const LrnParams& p, const float* x, const float* dy,
                   float* dx) override {
    Binary(int64_t{n} * c * hw, x, dy, dx);
    cpu_->LrnBackward(n, c, hw, p, x, dy, dx);
  }
  void DropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                      float* y) override {
    Binary(n, x, mask, y);
    cpu_->DropoutForward(n, rate, seed, x, mask, y);
  }
  void DropoutBackward(int64_t n, const float* mask, const float* dy, float* dx) override {
    Binary(n, mask, dy, dx);
    cpu_->DropoutBackward(n, mask, dy, dx);
  }
  void SoftmaxCrossEntropy(int batch, int classes, const float* logits, const int32_t* labels,
                           float grad_scale, float* loss, float* dlogits) override {
    F(logits, int64_t{batch} * classes, "logits");
    Check(labels, sizeof(int32_t) * batch, "labels");
    F(loss, batch, "loss");
    if (dlogits) F(dlogits, int64_t{batch} * classes, "dlogits");
    cpu_->SoftmaxCrossEntropy(batch, classes, logits, labels, grad_scale, loss, dlogits);
  }
  void Axpy(int64_t n, float alpha, const float* x, float* y) override {
    Unary(n, x, y);
    cpu_->Axpy(n, alpha, x, y);
  }
  void Scale(int64_t n, float alpha, float* y) override {
    F(y, n, "Scale");
    cpu_->Scale(n, alpha, y);
  }
  void Fill(int64_t n, float value, float* y) override {
    F(y, n, "Fill");
    cpu_->Fill(n, value, y);
  }
  void AverageOf(int k, const float* const* in, int64_t n, float* out) override {
    for (int j = 0; j < k; ++j) F(in[j], n, "AverageOf in");
    F(out, n, "AverageOf out");
    cpu_->AverageOf(k, in, n, out);
  }
  void MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay, const float* g,
                      float* v, float* p) override {
    Binary(n, g, v, p);
    cpu_->MomentumUpdate(n, lr, momentum, weight_decay, g, v, p);
  }

 private:
  void Flush() {
    for (const PendingCopy& c : queued_) std::memcpy(c.host, c.src, c.bytes);  // host -> dst
    queued_.clear();
  }
  void Check(const void* p, size_t bytes, const char* what) {
    Flush();  // every op and copy runs after the uploads queued before it
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    auto it = live_.upper_bound(a);
    if (it != live_.begin()) {
      --it;
      if (a >= it->first && a + bytes <= it->first + it->second) return;
    }
    if (violations++ == 0) first_violation = what;
  }
  void F(const float* p, int64_t n, const char* what) {
    Check(p, static_cast<size_t>(n) * sizeof(float), what);
  }
  void Unary(int64_t n, const float* x, const float* y) {
    F(x, n, "input");
    F(y, n, "output");
  }
  void Binary(int64_t n, const float* a, const float* b, const float* c) {
    F(a, n, "first");
    F(b, n, "second");
    F(c, n, "output");
  }

  struct PendingCopy {
    const void* src;
    size_t bytes;
    void* host;
  };
  std::unique_ptr<kernels::CpuBackend> cpu_;
  std::map<uintptr_t, size_t> live_;
  std::map<uint64_t, PendingCopy> pending_;
  std::vector<PendingCopy> queued_;  // uploads: src = host, host = device destination
  uint64_t next_ticket_ = 1;
};

// Every layer kind.
ModelBuilder EveryLayer() {
  ModelBuilder b({3, 12, 10});
  b.Conv2d("conv1", 6, 3, 1, Padding::kSame).Relu().MaxPool(3, 2, Padding::kSame);
  b.Lrn({.depth_radius = 2, .bias = 1.0f, .alpha = 0.01f, .beta = 0.75f});
  b.Conv2d("conv2", 5, 3).Tanh().AvgPool(2, 2);
  b.Dropout(0.3f).Dense("fc1", 16).Sigmoid().Dense("logits", 7, Init::kGlorot);
  return b;
}

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

Batch RandomBatch(const Model<float>& m, int batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Batch b;
  b.x.resize(static_cast<size_t>(batch * NumElements(m.input_shape())));
  for (float& v : b.x) v = dist(rng);
  for (int i = 0; i < batch; ++i) {
    b.labels.push_back(std::uniform_int_distribution<int>(0, m.num_classes() - 1)(rng));
  }
  return b;
}

TEST(ModelBackendMemoryTest, DeviceMemoryModelIsBitwiseEqualToTheCpuModel) {
  auto cpu = std::move(kernels::CpuBackend::Create({}).value());
  CheckedDeviceBackend dev;
  auto host_model = EveryLayer().Build<float>(cpu.get(), 7).value();
  auto dev_model = EveryLayer().Build<float>(&dev, 7).value();
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const Batch b = RandomBatch(*host_model, 5, 100 + step);
    // The hook sees each gradient already on the host.
    std::vector<std::vector<float>> seen(dev_model->num_variables());
    auto on_gradient = [&](int v) {
      auto g = dev_model->gradient(v);
      seen[v].assign(g.begin(), g.end());
    };
    auto r_host = host_model->TrainStep(b.x.data(), b.labels.data(), 5);
    auto r_dev = dev_model->TrainStep(b.x.data(), b.labels.data(), 5, on_gradient);
    ASSERT_TRUE(r_host.ok() && r_dev.ok()) << r_dev.status().ToString();
    EXPECT_EQ(r_dev->loss, r_host->loss);
    EXPECT_EQ(r_dev->correct, r_host->correct);
    for (int v = 0; v < host_model->num_variables(); ++v) {
      SCOPED_TRACE(host_model->variables()[v].name);
      const auto want = host_model->gradient(v);
      const auto got = dev_model->gradient(v);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), got.begin(), got.end()));
      EXPECT_TRUE(std::equal(want.begin(), want.end(), seen[v].begin(), seen[v].end()));
      EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](float g) { return g != 0.0f; }));
    }
    // A host-side update (what a pull or the local optimizer does) reaches the device copy.
    for (int v = 0; v < host_model->num_variables(); ++v) {
      auto hv = host_model->value(v);
      auto dv = dev_model->value(v);
      for (size_t i = 0; i < hv.size(); ++i) {
        hv[i] -= 0.1f * host_model->gradient(v)[i];
        dv[i] -= 0.1f * dev_model->gradient(v)[i];
      }
    }
    auto e_host = host_model->Evaluate(b.x.data(), b.labels.data(), 5);
    auto e_dev = dev_model->Evaluate(b.x.data(), b.labels.data(), 5);
    ASSERT_TRUE(e_host.ok() && e_dev.ok());
    EXPECT_EQ(e_dev->loss, e_host->loss);
  }
  // SetVariable reaches the device copy too.
  Tensor t = host_model->GetVariable(0);
  t.f32()[0] += 0.5f;
  ASSERT_TRUE(host_model->SetVariable(0, t).ok());
  ASSERT_TRUE(dev_model->SetVariable(0, t).ok());
  const Batch b = RandomBatch(*host_model, 4, 999);
  EXPECT_EQ(dev_model->Evaluate(b.x.data(), b.labels.data(), 4)->loss,
            host_model->Evaluate(b.x.data(), b.labels.data(), 4)->loss);
  EXPECT_EQ(dev.pending_copies(), 0u) << "every asynchronous copy is waited for";
  EXPECT_EQ(dev.violations, 0) << "first op given a pointer outside backend memory: "
                               << dev.first_violation;
  EXPECT_GT(dev.bytes_to_device, 0);
  EXPECT_GT(dev.bytes_to_host, 0);
}

TEST(ModelBackendMemoryTest, BackendDeliveryLeavesGradientsOnTheDevice) {
  auto cpu = std::move(kernels::CpuBackend::Create({}).value());
  CheckedDeviceBackend dev;
  auto host_model = EveryLayer().Build<float>(cpu.get(), 9).value();
  auto dev_model = EveryLayer().Build<float>(&dev, 9).value();
  const Batch b = RandomBatch(*host_model, 3, 8);
  std::vector<int> order;
  ASSERT_TRUE(host_model->TrainStep(b.x.data(), b.labels.data(), 3).ok());
  const int64_t copied_out = dev.bytes_to_host;
  auto r = dev_model->TrainStep(
      b.x.data(), b.labels.data(), 3, [&](int v) { order.push_back(v); },
      Model<float>::GradientDelivery::kBackend);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // Only the logits and losses came back; the gradients stayed on the device.
  EXPECT_EQ(dev.bytes_to_host - copied_out, int64_t{3} * (7 + 1) * 4);
  // Reverse layer order, kernel before bias within a layer.
  EXPECT_EQ(order, (std::vector<int>{6, 7, 4, 5, 2, 3, 0, 1}));
  for (int v = 0; v < dev_model->num_variables(); ++v) {
    SCOPED_TRACE(dev_model->variables()[v].name);
    const auto want = host_model->gradient(v);
    std::vector<float> got(want.size());
    dev.CopyToHost(dev_model->backend_gradient(v), got.size() * sizeof(float), got.data());
    EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
    const auto host = dev_model->gradient(v);
    EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](float g) { return g == 0.0f; }))
        << "the host gradient is left as it was";
  }
  EXPECT_EQ(dev.violations, 0) << dev.first_violation;
}

TEST(ModelBackendMemoryTest, MomentumSgdOnTheDeviceMatchesItOnTheHost) {
  auto cpu = std::move(kernels::CpuBackend::Create({}).value());
  CheckedDeviceBackend dev;
  auto host_model = EveryLayer().Build<float>(cpu.get(), 11).value();
  auto dev_model = EveryLayer().Build<float>(&dev, 11).value();
  const MomentumSgdOptions o{.learning_rate = 0.05f, .momentum = 0.9f, .weight_decay = 1e-3f};
  auto host_sgd = MomentumSgd::Create(host_model.get(), cpu.get(), o);
  auto dev_sgd = MomentumSgd::Create(dev_model.get(), &dev, o);  // the model's own backend
  ASSERT_TRUE(host_sgd.ok() && dev_sgd.ok()) << dev_sgd.status().ToString();
  // A device backend that is not the model's is refused.
  CheckedDeviceBackend other;
  EXPECT_FALSE(MomentumSgd::Create(dev_model.get(), &other, o).ok());
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    const Batch b = RandomBatch(*host_model, 4, 300 + step);
    ASSERT_TRUE(host_model->TrainStep(b.x.data(), b.labels.data(), 4).ok());
    host_sgd->Step();
    const int64_t to_host = dev.bytes_to_host;
    ASSERT_TRUE(dev_model
                    ->TrainStep(
                        b.x.data(), b.labels.data(), 4, [&](int v) { dev_sgd->StepVariable(v); },
                        Model<float>::GradientDelivery::kBackend)
                    .ok());
    // Only the logits and losses crossed to the host: values, gradients and velocities stayed.
    EXPECT_EQ(dev.bytes_to_host - to_host, int64_t{4} * (7 + 1) * 4);
  }
  // The host copies are brought back from the device when read, and match bit for bit.
  for (int v = 0; v < host_model->num_variables(); ++v) {
    SCOPED_TRACE(host_model->variables()[v].name);
    const Tensor want = host_model->GetVariable(v), got = dev_model->GetVariable(v);
    EXPECT_EQ(std::memcmp(want.f32(), got.f32(), want.num_elements() * sizeof(float)), 0);
  }
  // A host write after that (a pull) still reaches the device.
  Tensor t = host_model->GetVariable(0);
  t.f32()[0] += 1.0f;
  ASSERT_TRUE(host_model->SetVariable(0, t).ok() && dev_model->SetVariable(0, t).ok());
  const Batch b = RandomBatch(*host_model, 4, 999);
  EXPECT_EQ(dev_model->Evaluate(b.x.data(), b.labels.data(), 4)->loss,
            host_model->Evaluate(b.x.data(), b.labels.data(), 4)->loss);
  EXPECT_EQ(dev.pending_copies(), 0u);
  EXPECT_EQ(dev.violations, 0) << dev.first_violation;
}

TEST(ModelBackendMemoryTest, OnlyChangedValuesAreCopiedToTheDevice) {
  CheckedDeviceBackend dev;
  auto model = EveryLayer().Build<float>(&dev, 3).value();
  const Batch b = RandomBatch(*model, 2, 5);
  ASSERT_TRUE(model->Evaluate(b.x.data(), b.labels.data(), 2).ok());
  const int64_t x_and_labels = static_cast<int64_t>(b.x.size() * sizeof(float) + 2 * 4);
  const int64_t first = dev.bytes_to_device;
  EXPECT_EQ(first, model->num_parameters() * 4 + x_and_labels) << "every value, once";
  ASSERT_TRUE(model->Evaluate(b.x.data(), b.labels.data(), 2).ok());
  EXPECT_EQ(dev.bytes_to_device - first, x_and_labels) << "unchanged values stay on the device";
  EXPECT_EQ(dev.violations, 0) << dev.first_violation;
}

TEST(ModelBackendMemoryTest, CudaModelMatchesTheCpuModel) {
  std::string why;
  if (!kernels::BuiltWithCuda())
    GTEST_SKIP() << "no GPU backend: " << (kernels::ListGpus(&why), why);
  if (kernels::ListGpus(&why).empty()) GTEST_SKIP() << "no GPU is present: " << why;
#ifdef TOWERPS_WITH_CUDA
  kernels::CudaBackendOptions o;
  o.memory.allow_growth = true;
  o.memory.memory_fraction = 0.5;
  auto gpu = kernels::CudaBackend::Create(o);
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  auto cpu = std::move(kernels::CpuBackend::Create({}).value());
  for (const std::string& name : {std::string("every-layer"), std::string("cifar10")}) {
    SCOPED_TRACE(name);
    const ModelBuilder builder = name == "every-layer" ? EveryLayer() : ZooModel(name).value();
    auto host_model = builder.Build<float>(cpu.get(), 11).value();
    auto gpu_model = builder.Build<float>(gpu->get(), 11).value();
    const Batch b = RandomBatch(*host_model, 8, 21);
    auto r_host = host_model->TrainStep(b.x.data(), b.labels.data(), 8);
    auto r_gpu = gpu_model->TrainStep(b.x.data(), b.labels.data(), 8);
    ASSERT_TRUE(r_host.ok() && r_gpu.ok()) << r_gpu.status().ToString();
    EXPECT_NEAR(r_gpu->loss, r_host->loss, 1e-4 * std::max(1.0, std::abs(r_host->loss)));
    for (int v = 0; v < host_model->num_variables(); ++v) {
      SCOPED_TRACE(host_model->variables()[v].name);
      const auto want = host_model->gradient(v);
      const auto got = gpu_model->gradient(v);
      float largest = 0;
      for (float g : want) largest = std::max(largest, std::abs(g));
      ASSERT_GT(largest, 0.0f);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], 1e-3f * largest + 1e-3f * std::abs(want[i]))
            << "element " << i;
      }
    }
  }
  // After warm-up, training takes no more device memory from CUDA: no cudaMalloc on the hot
  // path (the allocator reuses its blocks).
  {
    auto model = ZooModel("cifar10").value().Build<float>(gpu->get(), 3).value();
    const Batch b = RandomBatch(*model, 16, 4);
    ASSERT_TRUE(model->TrainStep(b.x.data(), b.labels.data(), 16).ok());
    const kernels::cuda::AllocatorStats warm = (*gpu)->memory_stats();
    for (int step = 0; step < 5; ++step) {
      ASSERT_TRUE(model->TrainStep(b.x.data(), b.labels.data(), 16).ok());
      ASSERT_TRUE(model->Evaluate(b.x.data(), b.labels.data(), 16).ok());
    }
    const kernels::cuda::AllocatorStats after = (*gpu)->memory_stats();
    EXPECT_EQ(after.num_segments, warm.num_segments);
    EXPECT_EQ(after.bytes_reserved, warm.bytes_reserved);
    EXPECT_EQ(after.bytes_in_use, warm.bytes_in_use);
  }
  EXPECT_GT((*gpu)->memory_stats().peak_bytes_in_use, 0u);
#endif
}

}  // namespace
}  // namespace towerps::worker
