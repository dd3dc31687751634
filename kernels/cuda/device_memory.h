// Device memory for the CUDA backend: the CachingAllocator (caching_allocator.h) bound to one
// device through cudaMalloc, cudaFree and cudaMemGetInfo.
//
// Contract: CreateDeviceAllocator() is thread-safe; it makes `device` current on the calling
// thread. The allocator it returns is thread-safe and must be destroyed before the device is
// reset. Errors: kNotFound for a device that does not exist, kResourceExhausted (from the
// allocator) when the configured share cannot be reserved, with the free memory in the message.
#ifndef TOWERPS_KERNELS_CUDA_DEVICE_MEMORY_H_
#define TOWERPS_KERNELS_CUDA_DEVICE_MEMORY_H_

#include <memory>

#include "kernels/cuda/caching_allocator.h"
#include "towerps/result.h"

namespace towerps::kernels::cuda {

Result<std::unique_ptr<CachingAllocator>> CreateDeviceAllocator(
    int device, const CachingAllocatorOptions& options);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_DEVICE_MEMORY_H_
