#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dropout.cuh"
#include "kernels/cuda/launch_config.cuh"
#include "kernels/dropout_hash.h"

namespace towerps::kernels::cuda {

static __global__ void dropout_forward_kernel(int64_t n, float rate, float keep_scale,
                                              uint64_t seed, const float* x, float* mask,
                                              float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float m = DropoutUniform(seed, static_cast<uint64_t>(i)) >= rate ? keep_scale : 0.0f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

static __global__ void dropout_backward_kernel(int64_t n, const float* mask, const float* dy,
                                               float* dx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    dx[i] = dy[i] * mask[i];
  }
}

void LaunchDropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                          float* y, cudaStream_t stream) {
  if (n == 0) return;
  const float keep_scale = 1.0f / (1.0f - rate);  // as the CPU backend computes it
  dropout_forward_kernel<<<Blocks(n), kThreads, 0, stream>>>(n, rate, keep_scale, seed, x, mask, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchDropoutBackward(int64_t n, const float* mask, const float* dy, float* dx,
                           cudaStream_t stream) {
  if (n == 0) return;
  dropout_backward_kernel<<<Blocks(n), kThreads, 0, stream>>>(n, mask, dy, dx);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
