#include <cstdint>

#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_config.cuh"

namespace towerps::kernels::cuda {

static __global__ void bias_add_kernel(int64_t total, int channels, int inner, const float* bias,
                                       float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] += bias[(i / inner) % channels];
  }
}

// inner == 1 (a matrix [outer, channels]): one thread per column, reading rows in order, so a
// warp reads consecutive addresses.
static __global__ void bias_backward_columns_kernel(int outer, int channels, const float* dy,
                                                    float* db) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= channels) return;
  float sum = 0.0f;
  for (int o = 0; o < outer; ++o) sum += dy[int64_t{o} * channels + ch];
  db[ch] = sum;
}

// inner > 1 (an image): one block per channel, a strided partial sum per thread, then a tree
// reduction in shared memory.
static __global__ void bias_backward_planes_kernel(int outer, int channels, int inner,
                                                   const float* dy, float* db) {
  __shared__ float partial[kThreads];
  const int ch = blockIdx.x;
  const int64_t count = int64_t{outer} * inner;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    const int64_t o = j / inner, i = j % inner;
    sum += dy[(o * channels + ch) * inner + i];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[ch] = partial[0];
}

void LaunchBiasAdd(int outer, int channels, int inner, const float* bias, float* y,
                   cudaStream_t stream) {
  const int64_t total = int64_t{outer} * channels * inner;
  if (total == 0) return;
  bias_add_kernel<<<Blocks(total), kThreads, 0, stream>>>(total, channels, inner, bias, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchBiasBackward(int outer, int channels, int inner, const float* dy, float* db,
                        cudaStream_t stream) {
  if (channels == 0) return;
  if (inner == 1) {
    bias_backward_columns_kernel<<<(channels + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
        outer, channels, dy, db);
  } else {
    // kThreads is a power of two, as the tree reduction needs.
    bias_backward_planes_kernel<<<channels, kThreads, 0, stream>>>(outer, channels, inner, dy, db);
  }
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
