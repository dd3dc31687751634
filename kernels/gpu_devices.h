// Lists the GPUs this process can see. Available in every build: without CUDA, or without a
// driver or device, the list is simply empty, so callers and tests decide what that means.
//
// Contract: thread-safe; queries the CUDA runtime on each call (cheap after the first).
#ifndef TOWERPS_KERNELS_GPU_DEVICES_H_
#define TOWERPS_KERNELS_GPU_DEVICES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace towerps::kernels {

struct GpuInfo {
  int index = 0;     // CUDA ordinal after CUDA_VISIBLE_DEVICES
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int compute_major = 0;
  int compute_minor = 0;
  uint64_t total_memory_bytes = 0;
};

// True when TowerPS was built with the CUDA backend.
bool BuiltWithCuda();

// The visible GPUs; empty without CUDA support, driver or device. `why_empty`, when given,
// receives the reason for an empty list ("built without CUDA", "no CUDA-capable device", ...).
std::vector<GpuInfo> ListGpus(std::string* why_empty = nullptr);

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_GPU_DEVICES_H_
