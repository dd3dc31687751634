#include <algorithm>
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

// Each channel's n * hw values are summed in `splits` contiguous pieces, one block each
// (grid splits x c), into partial[ch * splits + piece]; then one thread per channel adds its
// pieces in order. The pieces depend only on the shape, so the bits do too.
//
// Piece `piece` of the m values of a channel: [*lo, *hi).
__device__ void PieceRange(int64_t m, int splits, int piece, int64_t* lo, int64_t* hi) {
  const int64_t per = (m + splits - 1) / splits;
  *lo = piece * per;
  *hi = min(m, *lo + per);
}

// Row `row` of the partial sums, its pieces added in order.
__device__ double SumPieces(const double* partial, int64_t row, int splits) {
  double sum = 0;
  for (int p = 0; p < splits; ++p) sum += partial[row * splits + p];
  return sum;
}

// Pass 1 (centre == nullptr): the sum of x. Pass 2: the sum of (x - centre[ch])^2.
__global__ void bn_partial_kernel(int n, int c, int hw, int splits, const float* x,
                                  const float* centre, double* partial) {
  __shared__ double shared[kReduceThreads];
  const int ch = blockIdx.y, piece = blockIdx.x;
  int64_t lo, hi;
  PieceRange(int64_t{n} * hw, splits, piece, &lo, &hi);
  const double mu = centre != nullptr ? centre[ch] : 0.0;
  double sum = 0;
  for (int64_t j = lo + threadIdx.x; j < hi; j += kReduceThreads) {
    const double d = x[At(c, hw, ch, j)] - mu;
    sum += centre != nullptr ? d * d : d;
  }
  const double total = BlockSum(sum, shared);
  if (threadIdx.x == 0) partial[int64_t{ch} * splits + piece] = total;
}

__global__ void bn_mean_kernel(int n, int c, int hw, int splits, const double* partial,
                               float* mean) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  mean[ch] = static_cast<float>(SumPieces(partial, ch, splits) / (static_cast<double>(n) * hw));
}

__global__ void bn_var_kernel(int n, int c, int hw, int splits, float epsilon,
                              const double* partial, float* var, float* inv_std) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  const double v = SumPieces(partial, ch, splits) / (static_cast<double>(n) * hw);
  var[ch] = static_cast<float>(v);
  inv_std[ch] = static_cast<float>(1.0 / sqrt(v + epsilon));
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

// dbeta = sum dy, dgamma = sum dy * xhat, in pieces as bn_partial_kernel: partial holds the
// pieces of dy's sum, then those of dy * xhat's (2 * c * splits doubles).
__global__ void bn_backward_partial_kernel(int n, int c, int hw, int splits, const float* x,
                                           const float* dy, const float* mean, const float* inv_std,
                                           double* partial) {
  __shared__ double shared[kReduceThreads];
  const int ch = blockIdx.y, piece = blockIdx.x;
  int64_t lo, hi;
  PieceRange(int64_t{n} * hw, splits, piece, &lo, &hi);
  const double mu = mean[ch], is = inv_std[ch];
  double sum_dy = 0, sum_dy_xhat = 0;
  for (int64_t j = lo + threadIdx.x; j < hi; j += kReduceThreads) {
    const int64_t at = At(c, hw, ch, j);
    sum_dy += dy[at];
    sum_dy_xhat += dy[at] * ((x[at] - mu) * is);
  }
  const double total_dy = BlockSum(sum_dy, shared);
  const double total_dy_xhat = BlockSum(sum_dy_xhat, shared);
  if (threadIdx.x == 0) {
    partial[int64_t{ch} * splits + piece] = total_dy;
    partial[int64_t{c + ch} * splits + piece] = total_dy_xhat;
  }
}

__global__ void bn_backward_sums_kernel(int c, int splits, const double* partial, float* dgamma,
                                        float* dbeta) {
  const int ch = blockIdx.x * blockDim.x + threadIdx.x;
  if (ch >= c) return;
  dbeta[ch] = static_cast<float>(SumPieces(partial, ch, splits));
  dgamma[ch] = static_cast<float>(SumPieces(partial, int64_t{c} + ch, splits));
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

int BatchNormSplits(int n, int c, int hw) {
  // About 2 blocks per multiprocessor of the largest GPUs in all (a fixed number, so the
  // pieces, and so the bits, do not depend on the GPU), at least 4096 values a piece.
  constexpr int64_t kBlocks = 264, kLeast = 4096;
  const int64_t m = int64_t{n} * hw;
  const int64_t want = (kBlocks + c - 1) / c;
  const int64_t most = (m + kLeast - 1) / kLeast;
  return static_cast<int>(std::max<int64_t>(1, std::min(want, most)));
}

void LaunchBatchNormForwardTraining(int n, int c, int hw, float epsilon, const float* x,
                                    const float* gamma, const float* beta, float* y, float* mean,
                                    float* var, float* inv_std, double* partial,
                                    cudaStream_t stream) {
  const int64_t total = int64_t{n} * c * hw;
  if (total == 0) return;
  const int splits = BatchNormSplits(n, c, hw);
  const dim3 grid(splits, c);
  const int per_channel = (c + kThreads - 1) / kThreads;
  bn_partial_kernel<<<grid, kReduceThreads, 0, stream>>>(n, c, hw, splits, x, nullptr, partial);
  TOWERPS_CUDA_CHECK_LAUNCH();
  bn_mean_kernel<<<per_channel, kThreads, 0, stream>>>(n, c, hw, splits, partial, mean);
  TOWERPS_CUDA_CHECK_LAUNCH();
  bn_partial_kernel<<<grid, kReduceThreads, 0, stream>>>(n, c, hw, splits, x, mean, partial);
  TOWERPS_CUDA_CHECK_LAUNCH();
  bn_var_kernel<<<per_channel, kThreads, 0, stream>>>(n, c, hw, splits, epsilon, partial, var,
                                                      inv_std);
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
                             float* dgamma, float* dbeta, double* partial, cudaStream_t stream) {
  const int64_t total = int64_t{n} * c * hw;
  if (total == 0) return;
  const int splits = BatchNormSplits(n, c, hw);
  bn_backward_partial_kernel<<<dim3(splits, c), kReduceThreads, 0, stream>>>(
      n, c, hw, splits, x, dy, mean, inv_std, partial);
  TOWERPS_CUDA_CHECK_LAUNCH();
  bn_backward_sums_kernel<<<(c + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      c, splits, partial, dgamma, dbeta);
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
