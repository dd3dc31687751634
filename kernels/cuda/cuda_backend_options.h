// CudaBackendOptions: how a CudaBackend (kernels/cuda/cuda_backend.h) is made. Free of CUDA
// headers, so that code built without the CUDA toolkit can ask for a GPU backend through the
// plugin (kernels/gpu_plugin.h).
//
// Contract: a value type. Changing its layout changes the plugin's ABI: bump kGpuPluginAbi.
#ifndef TOWERPS_KERNELS_CUDA_CUDA_BACKEND_OPTIONS_H_
#define TOWERPS_KERNELS_CUDA_CUDA_BACKEND_OPTIONS_H_

#include <cstddef>

#include "kernels/cuda/caching_allocator.h"

namespace towerps::kernels {

struct CudaBackendOptions {
  // CUDA device ordinal, after CUDA_VISIBLE_DEVICES.
  int device = 0;
  // The share of the device's memory and whether it grows (--gpu-memory-fraction,
  // --allow-growth). device_name is filled in by Create.
  cuda::CachingAllocatorOptions memory;
  // Let cuBLAS and cuDNN use TF32 tensor cores for float32.
  bool allow_tf32 = false;
  // Let cuDNN convolve through FFT and Winograd transforms (kernels/cuda/conv_planner.h): faster
  // for some shapes, with float32 error about 1e-4 of the largest output instead of 1e-6.
  bool allow_transform_algorithms = false;
  // The filter gradient as im2col and a batched GEMM (kernels/cuda/conv_filter_gemm.cuh) rather
  // than cuDNN's deterministic backward-filter algorithm (ConvPlannerOptions).
  bool filter_gradient_gemm = true;
  // Most workspace one convolution algorithm may use; faster algorithms needing more are skipped.
  size_t conv_workspace_limit_bytes = size_t{512} << 20;
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_CUDA_CUDA_BACKEND_OPTIONS_H_
