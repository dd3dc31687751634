#include "kernels/cuda/device_memory.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/cuda_check.h"

namespace towerps::kernels::cuda {

Result<std::unique_ptr<CachingAllocator>> CreateDeviceAllocator(
    int device, const CachingAllocatorOptions& options) {
  const std::string name = "gpu:" + std::to_string(device);
  TOWERPS_RETURN_IF_ERROR(CudaStatus(cudaSetDevice(device), "cudaSetDevice(" + name + ")"));
  size_t free_bytes = 0, total_bytes = 0;
  TOWERPS_RETURN_IF_ERROR(
      CudaStatus(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo on " + name));
  RawDeviceMemory raw;
  raw.total_bytes = total_bytes;
  // Each call makes the device current: the allocator may be used from tower threads.
  raw.allocate = [device, name](size_t bytes) -> Result<void*> {
    TOWERPS_CUDA_CHECK(cudaSetDevice(device));
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes);
    if (err != cudaSuccess) {
      cudaGetLastError();  // an allocation failure is not sticky; clear it for later checks
      return CudaStatus(err, "cudaMalloc of " + std::to_string(bytes) + " bytes on " + name);
    }
    return p;
  };
  raw.free = [device](void* p) {
    TOWERPS_CUDA_CHECK(cudaSetDevice(device));
    TOWERPS_CUDA_CHECK(cudaFree(p));
  };
  raw.free_bytes = [device]() -> size_t {
    size_t f = 0, t = 0;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return f;
  };
  CachingAllocatorOptions o = options;
  o.device_name = name;
  return CachingAllocator::Create(o, std::move(raw));
}

}  // namespace towerps::kernels::cuda
