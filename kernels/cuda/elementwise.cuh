// CUDA versions of kernels/cpu/elementwise.h. Launchers only; pointers are device memory,
// borrowed; work is queued on `stream` and not synchronised.
#ifndef TOWERPS_KERNELS_CUDA_ELEMENTWISE_CUH_
#define TOWERPS_KERNELS_CUDA_ELEMENTWISE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace towerps::kernels::cuda {

void LaunchAxpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream);
void LaunchScale(int64_t n, float alpha, float* y, cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_ELEMENTWISE_CUH_
