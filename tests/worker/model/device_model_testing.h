// Helpers of the tests that run a model on a backend whose memory is not host memory
// (model_backend_memory_test.cc, model_tables_memory_test.cc): seeded inputs, and a CUDA backend
// when a GPU is there. Header-only, for tests.
#ifndef TOWERPS_TESTS_WORKER_MODEL_DEVICE_MODEL_TESTING_H_
#define TOWERPS_TESTS_WORKER_MODEL_DEVICE_MODEL_TESTING_H_

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/gpu_devices.h"
#include "worker/model/model.h"
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
