#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/interaction.cuh"
#include "kernels/cuda/launch_config.cuh"

namespace towerps::kernels::cuda {

static __global__ void add_columns_kernel(int64_t rows, int64_t width, const float* x,
                                          int64_t x_stride, float* y, int64_t y_stride) {
  const int64_t total = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width, j = i % width;
    y[r * y_stride + j] += x[r * x_stride + j];
  }
}

void LaunchAddColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                      int64_t y_stride, cudaStream_t stream) {
  if (rows * width == 0) return;
  add_columns_kernel<<<Blocks(rows * width), kThreads, 0, stream>>>(rows, width, x, x_stride, y,
                                                                    y_stride);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

static __global__ void embedding_forward_kernel(int batch, int fields, int dim, const float* rows,
                                                const uint32_t* index, float* y, int64_t y_stride) {
  const int64_t width = int64_t{fields} * dim, total = batch * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = t / width, c = t % width;
    y[b * y_stride + c] = rows[int64_t{index[b * fields + c / dim]} * dim + c % dim];
  }
}

void LaunchEmbeddingForward(int batch, int fields, int dim, const float* rows,
                            const uint32_t* index, float* y, int64_t y_stride,
                            cudaStream_t stream) {
  const int64_t total = int64_t{batch} * fields * dim;
  if (total == 0) return;
  embedding_forward_kernel<<<Blocks(total), kThreads, 0, stream>>>(batch, fields, dim, rows, index,
                                                                   y, y_stride);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

static __global__ void embedding_backward_kernel(int fields, int dim, int64_t unique,
                                                 const uint32_t* offsets, const uint32_t* positions,
                                                 const float* dy, int64_t dy_stride, float* drows) {
  const int64_t total = unique * dim;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t u = t / dim;
    const int j = static_cast<int>(t % dim);
    float sum = 0.0f;
    for (uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
      const int64_t p = positions[k];
      sum += dy[(p / fields) * dy_stride + (p % fields) * dim + j];
    }
    drows[t] = sum;
  }
}

void LaunchEmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                             const uint32_t* positions, const float* dy, int64_t dy_stride,
                             float* drows, cudaStream_t stream) {
  const int64_t total = unique * dim;
  if (total == 0) return;
  embedding_backward_kernel<<<Blocks(total), kThreads, 0, stream>>>(
      fields, dim, unique, offsets, positions, dy, dy_stride, drows);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

// 1 / the bag's use count for a mean over a non-empty bag, else 1 (kernels/embedding_uses.h's
// BagScale, on the device).
static __device__ float bag_scale(const uint32_t* bags, int64_t b, bool mean) {
  const uint32_t n = bags[b + 1] - bags[b];
  return mean && n > 0 ? 1.0f / static_cast<float>(n) : 1.0f;
}

static __global__ void embedding_bag_forward_kernel(int batch, int dim, const float* rows,
                                                    const uint32_t* index, const uint32_t* bags,
                                                    bool mean, float* y, int64_t y_stride) {
  const int64_t total = int64_t{batch} * dim;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = t / dim;
    const int j = static_cast<int>(t % dim);
    float sum = 0.0f;
    for (uint32_t k = bags[b]; k < bags[b + 1]; ++k) sum += rows[int64_t{index[k]} * dim + j];
    const float s = bag_scale(bags, b, mean);
    y[b * y_stride + j] = s != 1.0f ? sum * s : sum;
  }
}

void LaunchEmbeddingBagForward(int batch, int dim, const float* rows, const uint32_t* index,
                               const uint32_t* bags, bool mean, float* y, int64_t y_stride,
                               cudaStream_t stream) {
  const int64_t total = int64_t{batch} * dim;
  if (total == 0) return;
  embedding_bag_forward_kernel<<<Blocks(total), kThreads, 0, stream>>>(batch, dim, rows, index,
                                                                       bags, mean, y, y_stride);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

static __global__ void embedding_bag_backward_kernel(int dim, int64_t unique,
                                                     const uint32_t* offsets,
                                                     const uint32_t* examples, const uint32_t* bags,
                                                     bool mean, const float* dy, int64_t dy_stride,
                                                     float* drows) {
  const int64_t total = unique * dim;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t u = t / dim;
    const int j = static_cast<int>(t % dim);
    float sum = 0.0f;
    for (uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
      const int64_t b = examples[k];
      sum += bag_scale(bags, b, mean) * dy[b * dy_stride + j];
    }
    drows[t] = sum;
  }
}

void LaunchEmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                                const uint32_t* examples, const uint32_t* bags, bool mean,
                                const float* dy, int64_t dy_stride, float* drows,
                                cudaStream_t stream) {
  const int64_t total = unique * dim;
  if (total == 0) return;
  embedding_bag_backward_kernel<<<Blocks(total), kThreads, 0, stream>>>(
      dim, unique, offsets, examples, bags, mean, dy, dy_stride, drows);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

// Output p of an example: p < d copies x_0; otherwise pair q = p - d is (i, j), j < i, with
// q = i(i-1)/2 + j.
static __global__ void dot_interaction_forward_kernel(int batch, int k, int d, const float* x,
                                                      float* y) {
  const int64_t width = d + int64_t{k} * (k - 1) / 2;
  const int64_t total = batch * width;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = t / width, p = t % width;
    const float* v = x + b * k * d;
    if (p < d) {
      y[t] = v[p];
      continue;
    }
    const int64_t q = p - d;
    int i = static_cast<int>((1.0 + sqrt(1.0 + 8.0 * static_cast<double>(q))) / 2.0);
    while (int64_t{i} * (i - 1) / 2 > q) --i;  // guard the square root's rounding
    while (int64_t{i + 1} * i / 2 <= q) ++i;
    const int j = static_cast<int>(q - int64_t{i} * (i - 1) / 2);
    const float* vi = v + int64_t{i} * d;
    const float* vj = v + int64_t{j} * d;
    float dot = 0.0f;
    for (int e = 0; e < d; ++e) dot += vi[e] * vj[e];
    y[t] = dot;
  }
}

void LaunchDotInteractionForward(int batch, int k, int d, const float* x, float* y,
                                 cudaStream_t stream) {
  const int64_t total = batch * (d + int64_t{k} * (k - 1) / 2);
  if (total == 0) return;
  dot_interaction_forward_kernel<<<Blocks(total), kThreads, 0, stream>>>(batch, k, d, x, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

// dx[b, i, e] = [i == 0] dy[b, e] + sum over partners m != i of dy[pair(i, m)] * x[b, m, e].
static __global__ void dot_interaction_backward_kernel(int batch, int k, int d, const float* x,
                                                       const float* dy, float* dx) {
  const int64_t width = d + int64_t{k} * (k - 1) / 2;
  const int64_t total = int64_t{batch} * k * d;
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < total;
       t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = t / (int64_t{k} * d);
    const int i = static_cast<int>((t / d) % k), e = static_cast<int>(t % d);
    const float* v = x + b * k * d;
    const float* gy = dy + b * width;
    float g = i == 0 ? gy[e] : 0.0f;
    for (int m = 0; m < k; ++m) {
      if (m == i) continue;
      const int hi = m > i ? m : i, lo = m > i ? i : m;
      g += gy[d + int64_t{hi} * (hi - 1) / 2 + lo] * v[int64_t{m} * d + e];
    }
    dx[t] = g;
  }
}

void LaunchDotInteractionBackward(int batch, int k, int d, const float* x, const float* dy,
                                  float* dx, cudaStream_t stream) {
  const int64_t total = int64_t{batch} * k * d;
  if (total == 0) return;
  dot_interaction_backward_kernel<<<Blocks(total), kThreads, 0, stream>>>(batch, k, d, x, dy, dx);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
