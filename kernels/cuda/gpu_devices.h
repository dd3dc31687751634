// The GPUs the CUDA runtime sees, inside the CUDA backend. Everything else asks through
// kernels::ListGpus() (kernels/gpu_devices.h), which loads the backend's plugin first.
//
// Contract: thread-safe; queries the CUDA runtime on each call.
#ifndef TOWERPS_KERNELS_CUDA_GPU_DEVICES_H_
#define TOWERPS_KERNELS_CUDA_GPU_DEVICES_H_

#include <string>
#include <vector>

#include "kernels/gpu_devices.h"

namespace towerps::kernels::cuda {

// As kernels::ListGpus, from the CUDA runtime.
std::vector<GpuInfo> ListCudaGpus(std::string* why_empty = nullptr);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_GPU_DEVICES_H_
