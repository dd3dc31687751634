// ListCudaGpus(): the GPUs, through the CUDA runtime.
#include <cuda_runtime.h>

#include <filesystem>

#include "kernels/cuda/gpu_devices.h"

namespace towerps::kernels::cuda {
namespace {

// Why cudaGetDeviceCount found nothing, in the user's terms. Without a GPU the runtime reports an
// "insufficient driver" (there is no driver at all), which reads as if one should be upgraded.
std::string WhyNoGpu(cudaError_t err) {
  const bool driver_loaded = std::filesystem::exists("/proc/driver/nvidia/version");
  if (err == cudaSuccess || err == cudaErrorNoDevice) {
    return driver_loaded ? "the NVIDIA driver sees no GPU (check CUDA_VISIBLE_DEVICES)"
                         : "this machine has no NVIDIA GPU (no NVIDIA driver is loaded)";
  }
  if (err == cudaErrorInsufficientDriver) {
    return driver_loaded ? "the NVIDIA driver is older than this build's CUDA runtime " +
                               std::to_string(CUDART_VERSION / 1000) + "." +
                               std::to_string(CUDART_VERSION % 1000 / 10) + "; update the driver"
                         : "this machine has no NVIDIA GPU (no NVIDIA driver is loaded)";
  }
  return std::string("CUDA reports ") + cudaGetErrorString(err);
}

}  // namespace

std::vector<GpuInfo> ListCudaGpus(std::string* why_empty) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    if (why_empty) *why_empty = WhyNoGpu(err);
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

}  // namespace towerps::kernels::cuda
