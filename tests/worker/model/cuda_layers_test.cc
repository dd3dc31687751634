// A zoo model's layers on CUDA against the same layers on the CPU, one layer at a time, so that a
// difference between the two models is pinned to the layer (and the pass) that makes it.
//
// The CPU model runs forward and backward; each CUDA layer is given that layer's CPU input
// (forward) and CPU output gradient (backward), so no difference is carried in from the layers
// around it, and no ReLU sees an input that rounding has moved across 0 (a kink, where two
// backends may rightly take different derivatives: device_model_testing.h's ReluMargin). A
// residual block is taken apart the same way: each layer of each branch on the CPU's activations
// inside the block. Every output, input gradient and parameter gradient must be within float32
// rounding of the CPU's: 1e-4 of the largest value, plus 1e-4 of itself (the summation orders
// differ). The convolutions' biases before a batch norm are exempt: their gradient is 0 in exact
// arithmetic, rounding noise on both sides. Skipped without a GPU; the harness itself runs on the
// checking stand-in everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend_buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/checked_device_backend.h"
#include "tests/worker/model/device_model_testing.h"
#include "worker/layers/batch_norm.h"
#include "worker/model/model_factory.h"
#include "worker/model/zoo.h"

namespace towerps::worker {
namespace {

using testing::InputBatch;
using testing::RandomBatch;
using testing::WhyNoCuda;

using Vec = std::vector<float>;

bool IsBatchNorm(const Layer<float>* layer) {
  return dynamic_cast<const BatchNorm<float>*>(layer) != nullptr;
}

// One layer of the CPU model and its twin on CUDA, run on the same host inputs: Forward, then
// Backward, each comparing every result.
class LayerPair {
 public:
  LayerPair(kernels::Backend<float>* cpu, kernels::Backend<float>* gpu, Layer<float>* host,
            Layer<float>* device, int batch, bool bias_before_batch_norm)
      : cpu_(cpu),
        gpu_(gpu),
        host_(host),
        device_(device),
        batch_(batch),
        bias_is_noise_(bias_before_batch_norm) {}

  // Returns the CPU's y.
  Vec Forward(const Vec& x) {
    x_ = x;
    y_.assign(static_cast<size_t>(batch_ * host_->output_size()), 0.0f);
    EXPECT_TRUE(host_->Reserve(*cpu_, batch_).ok());
    host_->Forward(*cpu_, batch_, x_.data(), y_.data(), true);
    EXPECT_TRUE(device_->Reserve(*gpu_, batch_).ok());
    x_dev_ = Upload(x_);
    y_dev_ = Upload(Unwritten(y_.size()));
    device_->Forward(*gpu_, batch_, x_dev_.data(), y_dev_.data(), true);
    Check("forward y", y_, Download(y_dev_));
    return y_;
  }
  // After Forward; returns the CPU's dx.
  Vec Backward(const Vec& dy) {
    Vec dx(x_.size());
    host_->Backward(*cpu_, batch_, x_.data(), y_.data(), dy.data(), dx.data());
    const kernels::BackendBuffer<float> dy_dev = Upload(dy);
    kernels::BackendBuffer<float> dx_dev = Upload(Unwritten(dx.size()));
    device_->Backward(*gpu_, batch_, x_dev_.data(), y_dev_.data(), dy_dev.data(), dx_dev.data());
    Check("backward dx", dx, Download(dx_dev));
    const auto host_params = host_->parameters(), device_params = device_->parameters();
    for (size_t i = 0; i < host_params.size(); ++i) {
      const Parameter<float>& p = *host_params[i];
      if (bias_is_noise_ && p.name.ends_with("/bias")) continue;
      Vec got(p.grad.size());
      gpu_->CopyToHost(device_params[i]->backend_grad(), got.size() * sizeof(float), got.data());
      Check("gradient of " + p.name, p.grad, got);
    }
    return dx;
  }

 private:
  // What a device output holds before the layer writes it: NaN, so that an element left
  // unwritten fails the comparison.
  static Vec Unwritten(size_t n) { return Vec(n, std::numeric_limits<float>::quiet_NaN()); }
  kernels::BackendBuffer<float> Upload(const Vec& v) {
    auto b = kernels::BackendBuffer<float>::Allocate(gpu_, static_cast<int64_t>(v.size()));
    TOWERPS_CHECK(b.ok()) << b.status().ToString();
    gpu_->CopyFromHost(v.data(), v.size() * sizeof(float), b->data());
    return std::move(*b);
  }
  Vec Download(const kernels::BackendBuffer<float>& b) {
    Vec v(static_cast<size_t>(b.size()));
    gpu_->CopyToHost(b.data(), v.size() * sizeof(float), v.data());
    return v;
  }
  void Check(const std::string& what, const Vec& want, const Vec& got) {
    float largest = 0;
    for (float v : want) largest = std::max(largest, std::abs(v));
    size_t worst = 0, outside = 0;
    float worst_score = -1, err = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const float e = std::abs(got[i] - want[i]);
      err = std::isnan(e) ? e : std::max(err, e);  // a NaN stays, and is reported
      outside += !(e <= 1e-4f * largest + 1e-4f * std::abs(want[i]));
      if (const float score = e / (largest + std::abs(want[i])); !(score <= worst_score)) {
        worst_score = score;
        worst = i;
      }
    }
    std::cout << "  " << host_->name() << " " << what << ": largest error "
              << err / std::max(largest, 1e-30f) << " of the largest value\n";
    EXPECT_EQ(outside, 0u) << host_->name() << " " << what << ": " << outside << " of "
                           << want.size() << " elements outside the bound; element " << worst
                           << " is " << got[worst] << " on CUDA against " << want[worst];
  }

  kernels::Backend<float>* cpu_;
  kernels::Backend<float>* gpu_;
  Layer<float>* host_;
  Layer<float>* device_;
  int batch_;
  bool bias_is_noise_;
  Vec x_, y_;
  kernels::BackendBuffer<float> x_dev_, y_dev_;
};

Vec Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Vec v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A block's layers (Layer::sublayers: the main branch, then the shortcut's), each given the CPU's
// activations inside the block from its input x, and the block's output gradient dy.
void CompareBlock(kernels::Backend<float>* cpu, kernels::Backend<float>* gpu, Layer<float>* host,
                  Layer<float>* device, int batch, const Vec& x, const Vec& dy) {
  const auto host_sub = host->sublayers(), device_sub = device->sublayers();
  ASSERT_EQ(host_sub.size(), device_sub.size());
  size_t start = 0;
  while (start < host_sub.size()) {
    // A branch runs until a layer takes the block's input again (the shortcut's first).
    std::vector<LayerPair> branch;
    Vec a = x;
    for (size_t j = start; j < host_sub.size(); ++j) {
      if (j > start && static_cast<int64_t>(a.size()) != batch * host_sub[j]->input_size()) break;
      const bool next_is_bn = j + 1 < host_sub.size() && IsBatchNorm(host_sub[j + 1]);
      branch.emplace_back(cpu, gpu, host_sub[j], device_sub[j], batch, next_is_bn);
      a = branch.back().Forward(a);
    }
    Vec g = dy;
    for (size_t j = branch.size(); j-- > 0;) g = branch[j].Backward(g);
    start += branch.size();
  }
}

// The comparison of `name` on `device` against the CPU, at batch 8.
void CompareEachLayer(const std::string& name, kernels::Backend<float>* device) {
  SCOPED_TRACE(name);
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  kernels::Backend<float>* gpu = device;
  constexpr int kBatch = 8;
  std::cout << name << " on " << device->name() << ", each layer given the CPU's inputs:\n";
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel(name));
  ASSERT_OK_AND_ASSIGN(auto host_model, BuildModel<float>(builder, cpu.get(), 11));
  ASSERT_OK_AND_ASSIGN(auto gpu_model, BuildModel<float>(builder, gpu, 11));
  // One step each first: the device model's parameters go to the device.
  const InputBatch b = RandomBatch(*host_model, kBatch, 21);
  ASSERT_TRUE(host_model->TrainStep(b.x.data(), b.labels.data(), kBatch).ok());
  ASSERT_TRUE(gpu_model->TrainStep(b.x.data(), b.labels.data(), kBatch).ok());
  const auto& host_layers = host_model->layers();
  const auto& gpu_layers = gpu_model->layers();
  const size_t n = host_layers.size();
  // Forward on the CPU's activations; a block runs whole on the CPU here, and is compared layer
  // by layer on the way back.
  std::vector<LayerPair> pairs;
  std::vector<Vec> inputs(n), outputs(n);
  Vec a = b.x;
  for (size_t i = 0; i < n; ++i) {
    Layer<float>* host = host_layers[i].get();
    const bool next_is_bn = i + 1 < n && IsBatchNorm(host_layers[i + 1].get());
    pairs.emplace_back(cpu.get(), gpu, host, gpu_layers[i].get(), kBatch, next_is_bn);
    inputs[i] = a;
    if (host->sublayers().empty()) {
      a = pairs[i].Forward(a);
    } else {
      outputs[i].assign(static_cast<size_t>(kBatch * host->output_size()), 0.0f);
      ASSERT_TRUE(host->Reserve(*cpu, kBatch).ok());
      host->Forward(*cpu, kBatch, a.data(), outputs[i].data(), true);
      a = outputs[i];
    }
  }
  Vec dy = Random(a.size(), 5);
  for (size_t i = n; i-- > 0;) {
    Layer<float>* host = host_layers[i].get();
    if (host->sublayers().empty()) {
      dy = pairs[i].Backward(dy);
      continue;
    }
    Vec dx(inputs[i].size());
    host->Backward(*cpu, kBatch, inputs[i].data(), outputs[i].data(), dy.data(), dx.data());
    CompareBlock(cpu.get(), gpu, host, gpu_layers[i].get(), kBatch, inputs[i], dy);
    dy = std::move(dx);
  }
}

TEST(CudaLayersTest, EachLayerOnCudaMatchesItOnTheCpu) {
  if (const std::string why = WhyNoCuda(); !why.empty()) GTEST_SKIP() << why;
#ifdef TOWERPS_WITH_CUDA
  ASSERT_OK_AND_ASSIGN(auto gpu, testing::GrowingGpuBackend());
  for (const std::string name : {"cifar10", "resnet20"}) CompareEachLayer(name, gpu.get());
#endif
}

// The harness itself, on the checking stand-in (the CPU's math in memory of its own): it gives
// each layer the same inputs on both sides, so every comparison holds, and no op is handed a
// host pointer.
TEST(CudaLayersTest, OnTheStandInEachLayerIsTheCpus) {
  CheckedDeviceBackend dev;
  for (const std::string name : {"cifar10", "resnet20"}) CompareEachLayer(name, &dev);
  EXPECT_EQ(dev.violations, 0) << dev.first_violation;
}

}  // namespace
}  // namespace towerps::worker
