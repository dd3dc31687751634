// Helpers of the tests that run a model on a backend whose memory is not host memory
// (model_backend_memory_test.cc, model_tables_memory_test.cc): seeded inputs, and a CUDA backend
// when a GPU is there. Header-only, for tests.
#ifndef TOWERPS_TESTS_WORKER_MODEL_DEVICE_MODEL_TESTING_H_
#define TOWERPS_TESTS_WORKER_MODEL_DEVICE_MODEL_TESTING_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/gpu_devices.h"
#include "towerps/check.h"
#include "worker/layers/activation.h"
#include "worker/model/model.h"
#include "worker/model/model_factory.h"
#ifdef TOWERPS_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace towerps::worker::testing {

// Random inputs and labels of a model's shape and classes.
struct InputBatch {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

inline InputBatch RandomBatch(const Model<float>& m, int batch, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  InputBatch b;
  b.x.resize(static_cast<size_t>(batch * NumElements(m.input_shape())));
  for (float& v : b.x) v = dist(rng);
  for (int i = 0; i < batch; ++i) {
    b.labels.push_back(std::uniform_int_distribution<int>(0, m.num_classes() - 1)(rng));
  }
  return b;
}

// How close a batch comes to a ReLU's kink: the smallest magnitude among the inputs of every
// ReLU in the forward pass of `x` through the model `builder` makes with `model_seed`, on the
// CPU (a residual block's branches walked layer by layer), relative to the largest magnitude in
// the same input. Where an input is within rounding of 0, two backends' float32 rounding
// differences can give opposite derivatives there. Under batch norm that is not small: a batch
// norm's beta gradient is a sum with heavy cancellation, so one such input moved a ResNet-20 beta
// gradient by 5% of the largest, and every gradient behind it in turn (an H200 run of
// 2026-11-30, where the CPU's batch-norm output was exactly 0 and the GPU's just above it). The
// model is a fresh one of its own, so the caller's (its dropout's draws included) is untouched.
inline double ReluMargin(const ModelBuilder& builder, uint64_t model_seed,
                         const std::vector<float>& x, int batch) {
  auto cpu = kernels::CpuBackend::Create({});
  TOWERPS_CHECK(cpu.ok()) << cpu.status().ToString();
  auto model = BuildModel<float>(builder, cpu->get(), model_seed);
  TOWERPS_CHECK(model.ok()) << model.status().ToString();
  double margin = 1.0;
  auto look = [&](Layer<float>* layer, const std::vector<float>& in) {
    const auto* act = dynamic_cast<const Activation<float>*>(layer);
    if (act == nullptr || act->kind() != ActivationKind::kRelu) return;
    float largest = 0, smallest = INFINITY;
    for (float v : in) {
      largest = std::max(largest, std::abs(v));
      smallest = std::min(smallest, std::abs(v));
    }
    if (largest > 0) margin = std::min(margin, double{smallest} / largest);
  };
  auto forward = [&](Layer<float>* layer, const std::vector<float>& in) {
    std::vector<float> out(static_cast<size_t>(batch * layer->output_size()));
    TOWERPS_CHECK(layer->Reserve(**cpu, batch).ok());
    layer->Forward(**cpu, batch, in.data(), out.data(), /*training=*/true);
    return out;
  };
  std::vector<float> a = x;
  for (const auto& layer : (*model)->layers()) {
    const std::vector<Layer<float>*> sub = layer->sublayers();
    std::vector<float> branch = a;  // a layer that takes the block's input again starts a branch
    for (size_t j = 0; j < sub.size(); ++j) {
      if (j > 0 && static_cast<int64_t>(branch.size()) != batch * sub[j]->input_size()) branch = a;
      look(sub[j], branch);
      branch = forward(sub[j], branch);
    }
    look(layer.get(), a);
    a = forward(layer.get(), a);
  }
  return margin;
}

// RandomBatch's batch for `model` (built from `builder` with `model_seed`) of the first seed from
// `seed` on whose forward pass no ReLU input is within `margin` (relative, as ReluMargin) of the
// kink, so that two backends take the same derivative everywhere; fails the test if none of 200
// seeds is.
inline InputBatch RandomBatchAwayFromKinks(const Model<float>& model, const ModelBuilder& builder,
                                           uint64_t model_seed, int batch, uint32_t seed,
                                           double margin) {
  for (uint32_t s = seed; s < seed + 200; ++s) {
    InputBatch b = RandomBatch(model, batch, s);
    if (ReluMargin(builder, model_seed, b.x, batch) >= margin) return b;
  }
  ADD_FAILURE() << "no batch of " << batch << " from seed " << seed << " keeps every ReLU input "
                << margin << " of its largest away from 0";
  return RandomBatch(model, batch, seed);
}

// Why the CUDA tests cannot run here, or "" when they can.
inline std::string WhyNoCuda() {
  std::string why;
  if (!kernels::BuiltWithCuda()) return "no GPU backend: " + (kernels::ListGpus(&why), why);
  if (kernels::ListGpus(&why).empty()) return "no GPU is present: " + why;
  return "";
}

#ifdef TOWERPS_WITH_CUDA
// A CUDA backend on gpu:0 that grows as needed, up to half the device.
inline Result<std::unique_ptr<kernels::CudaBackend>> GrowingGpuBackend() {
  kernels::CudaBackendOptions o;
  o.memory.allow_growth = true;
  o.memory.memory_fraction = 0.5;
  return kernels::CudaBackend::Create(o);
}
#endif

}  // namespace towerps::worker::testing

#endif  // TOWERPS_TESTS_WORKER_MODEL_DEVICE_MODEL_TESTING_H_
