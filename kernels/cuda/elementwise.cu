#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"

namespace towerps::kernels::cuda {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 16 ? blocks : 65535 * 16);  // grid-stride beyond
}

}  // namespace

static __global__ void axpy_kernel(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += alpha * x[i];
  }
}

static __global__ void scale_kernel(int64_t n, float alpha, float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] *= alpha;
  }
}

void LaunchAxpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream) {
  if (n == 0) return;
  axpy_kernel<<<Blocks(n), kThreads, 0, stream>>>(n, alpha, x, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchScale(int64_t n, float alpha, float* y, cudaStream_t stream) {
  if (n == 0) return;
  scale_kernel<<<Blocks(n), kThreads, 0, stream>>>(n, alpha, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
