#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_config.cuh"

namespace towerps::kernels::cuda {

template <ActivationGradient kKind>
static __global__ void activation_backward_kernel(int64_t n, const float* y, const float* dy,
                                                  float* dx) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float yi = y[i];
    if constexpr (kKind == ActivationGradient::kRelu) {
      dx[i] = yi > 0.0f ? dy[i] : 0.0f;
    } else if constexpr (kKind == ActivationGradient::kTanh) {
      dx[i] = dy[i] * (1.0f - yi * yi);
    } else {
      dx[i] = dy[i] * yi * (1.0f - yi);
    }
  }
}

void LaunchActivationBackward(ActivationGradient kind, int64_t n, const float* y, const float* dy,
                              float* dx, cudaStream_t stream) {
  if (n == 0) return;
  switch (kind) {
    case ActivationGradient::kRelu:
      activation_backward_kernel<ActivationGradient::kRelu>
          <<<Blocks(n), kThreads, 0, stream>>>(n, y, dy, dx);
      break;
    case ActivationGradient::kTanh:
      activation_backward_kernel<ActivationGradient::kTanh>
          <<<Blocks(n), kThreads, 0, stream>>>(n, y, dy, dx);
      break;
    case ActivationGradient::kSigmoid:
      activation_backward_kernel<ActivationGradient::kSigmoid>
          <<<Blocks(n), kThreads, 0, stream>>>(n, y, dy, dx);
      break;
  }
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
