#include <cstdint>

#include "kernels/cuda/batch_norm.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_config.cuh"

namespace towerps::kernels::cuda {
namespace {

constexpr int kReduceThreads = 256;  // a power of two: the tree below halves it

// The sum over the block of each thread's `v`, by a fixed tree in shared memory; every thread
// gets the result. `shared` holds kReduceThreads doubles.
__device__ double BlockSum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int half = kReduceThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  const double total = shared[0];
  __syncthreads();  // shared is reused by the next call
  return total;
}

// Value j (of n * hw) of channel ch: the images are [n, c, hw].
__device__ int64_t At(int c, int hw, int ch, int64_t j) { return (j / hw * c + ch) * hw + j % hw; }

// One block per channel: mean, var (biased), inv_std.
__global__ void bn_stats_kernel(int n, int c, int hw, float epsilon, const float* x, float* mean,
                                float* var, float* inv_std) {
  __shared__ double shared[kReduceThreads];
  const int ch = blockIdx.x;
  const int64_t m = int64_t{n} * hw;
  double sum = 0;
  for (int64_t j = threadIdx.x; j < m; j += kReduceThreads) sum += x[At(c, hw, ch, j)];
  const double mu = BlockSum(sum, shared) / static_cast<double>(m);
  double sq = 0;
  for (int64_t j = threadIdx.x; j < m; j += kReduceThreads) {
    const double d = x[At(c, hw, ch, j)] - mu;
    sq += d * d;
  }
  const double v = BlockSum(sq, shared) / static_cast<double>(m);
  if (threadIdx.x == 0) {
    mean[ch] = static_cast<float>(mu);
    var[ch] = static_cast<float>(v);
    inv_std[ch] = static_cast<float>(1.0 / sqrt(v + epsilon));
  }
}

// y = scale * x + shift per channel, as the CPU computes it.
__global__ void bn_apply_kernel(int n, int c, int hw, const float* x, const float* gamma,
                                const float* beta, const float* mean, const float* inv_std,
                                float* y) {
  const int64_t total = int64_t{n} * c * hw;
  for (int64_t at = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; at < total;
       at += int64_t{gridDim.x} * blockDim.x) {
    const int ch = static_cast<int>((at / hw) % c);
    const float scale = gamma[ch] * inv_std[ch];
    const float shift = beta[ch] - scale * mean[ch];
    y[at] = scale * x[at] + shift;
  }
}

__global__ void bn_inference_kernel(int n, int c, int hw, float epsilon, const float* x,
                                    const float* gamma, const float* beta, const float* mean,
                                    const float* var, float* y) {
  const int64_t total = int64_t{n} * c * hw;
  for (int64_t at = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; at < total;
       at += int64_t{gridDim.x} * blockDim.x) {
    const int ch = static_cast<int>((at / hw) % c);
    const float scale = gamma[ch] / sqrtf(var[ch] + epsilon);
    const float shift = beta[ch] - scale * mean[ch];
    y[at] = scale * x[at] + shift;
  }
}

// One block per channel: dbeta = sum dy, dgamma = sum dy * xhat.
__global__ void bn_backward_reduce_kernel(int n, int c, int hw, const float* x, const float* dy,
                                          const float* mean, const float* inv_std, float* dgamma,
                                          float* dbeta) {
  __shared__ double shared[kReduceThreads];
  const int ch = blockIdx.x;
  const int64_t m = int64_t{n} * hw;
  const double mu = mean[ch], is = inv_std[ch];
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t j = threadIdx.x; j < m; j += kReduceThreads) {
    const int64_t at = At(c, hw, ch, j);
    sum_dy += dy[at];
    sum_dy_xhat += dy[at] * ((x[at] - mu) * is);
  }
  const double total_dy = BlockSum(sum_dy, shared);
  const double total_dy_xhat = BlockSum(sum_dy_xhat, shared);
  if (threadIdx.x == 0) {
    dbeta[ch] = static_cast<float>(total_dy);
    dgamma[ch] = static_cast<float>(total_dy_xhat);
  }
}

// dx = k * (m * dy - dbeta - xhat * dgamma), k = gamma * inv_std / m, as the CPU computes it.
__global__ void bn_backward_dx_kernel(int n, int c, int hw, const float* x, const float* dy,
                                      const float* gamma, const float* mean, const float* inv_std,
                                      const float* dgamma, const float* dbeta, float* dx) {
  const int64_t total = int64_t{n} * c * hw;
  const double m = double{1} * n * hw;
  const float fm = static_cast<float>(m);
  for (int64_t at = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; at < total;
       at += int64_t{gridDim.x} * blockDim.x) {
    const int ch = static_cast<int>((at / hw) % c);
    const float k = static_cast<float>(gamma[ch] * static_cast<double>(inv_std[ch]) / m);
    const float xhat = (x[at] - mean[ch]) * inv_std[ch];
    dx[at] = k * (fm * dy[at] - dbeta[ch] - xhat * dgamma[ch]);
  }
}

__global__ void gap_forward_kernel(int64_t planes, int hw, const float* x, float* y) {
  for (int64_t p = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; p < planes;
       p += int64_t{gridDim.x} * blockDim.x) {
    double sum = 0;
    for (int i = 0; i < hw; ++i) sum += x[p * hw + i];
    y[p] = static_cast<float>(sum / hw);
  }
}

__global__ void gap_backward_kernel(int64_t planes, int hw, const float* dy, float* dx) {
  const int64_t total = planes * hw;
  for (int64_t at = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; at < total;
       at += int64_t{gridDim.x} * blockDim.x) {
    dx[at] = dy[at / hw] / static_cast<float>(hw);
  }
}

__global__ void add_kernel(int64_t n, const float* a, const float* b, float* y) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    y[i] = a[i] + b[i];
  }
}

}  // namespace

void LaunchBatchNormForwardTraining(int n, int c, int hw, float epsilon, const float* x,
                                    const float* gamma, const float* beta, float* y, float* mean,
                                    float* var, float* inv_std, cudaStream_t stream) {
  const int64_t total = int64_t{n} * c * hw;
  if (total == 0) return;
  bn_stats_kernel<<<c, kReduceThreads, 0, stream>>>(n, c, hw, epsilon, x, mean, var, inv_std);
  TOWERPS_CUDA_CHECK_LAUNCH();
  bn_apply_kernel<<<Blocks(total), kThreads, 0, stream>>>(n, c, hw, x, gamma, beta, mean, inv_std,
                                                          y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchBatchNormForwardInference(int n, int c, int hw, float epsilon, const float* x,
                                     const float* gamma, const float* beta, const float* mean,
                                     const float* var, float* y, cudaStream_t stream) {
  const int64_t total = int64_t{n} * c * hw;
  if (total == 0) return;
  bn_inference_kernel<<<Blocks(total), kThreads, 0, stream>>>(n, c, hw, epsilon, x, gamma, beta,
                                                              mean, var, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchBatchNormBackward(int n, int c, int hw, const float* x, const float* dy,
                             const float* gamma, const float* mean, const float* inv_std, float* dx,
                             float* dgamma, float* dbeta, cudaStream_t stream) {
  const int64_t total = int64_t{n} * c * hw;
  if (total == 0) return;
  bn_backward_reduce_kernel<<<c, kReduceThreads, 0, stream>>>(n, c, hw, x, dy, mean, inv_std,
                                                              dgamma, dbeta);
  TOWERPS_CUDA_CHECK_LAUNCH();
  bn_backward_dx_kernel<<<Blocks(total), kThreads, 0, stream>>>(n, c, hw, x, dy, gamma, mean,
                                                                inv_std, dgamma, dbeta, dx);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchGlobalAvgPoolForward(int n, int c, int hw, const float* x, float* y,
                                cudaStream_t stream) {
  const int64_t planes = int64_t{n} * c;
  if (planes == 0) return;
  gap_forward_kernel<<<Blocks(planes), kThreads, 0, stream>>>(planes, hw, x, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchGlobalAvgPoolBackward(int n, int c, int hw, const float* dy, float* dx,
                                 cudaStream_t stream) {
  const int64_t planes = int64_t{n} * c;
  if (planes == 0) return;
  gap_backward_kernel<<<Blocks(planes * hw), kThreads, 0, stream>>>(planes, hw, dy, dx);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchAdd(int64_t n, const float* a, const float* b, float* y, cudaStream_t stream) {
  if (n == 0) return;
  add_kernel<<<Blocks(n), kThreads, 0, stream>>>(n, a, b, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
