// ListGpus() through the CUDA runtime.
#include <cuda_runtime.h>

#include "kernels/gpu_devices.h"

namespace towerps::kernels {

bool BuiltWithCuda() { return true; }

std::vector<GpuInfo> ListGpus(std::string* why_empty) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why_empty) {
      *why_empty = err != cudaSuccess ? std::string("CUDA reports ") + cudaGetErrorString(err)
                                      : "CUDA reports no visible device";
    }
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return {};
  }
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) continue;
    gpus.push_back({i, prop.name, prop.major, prop.minor, prop.totalGlobalMem});
  }
  return gpus;
}

}  // namespace towerps::kernels
