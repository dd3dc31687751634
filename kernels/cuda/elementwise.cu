#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/launch_config.cuh"

namespace towerps::kernels::cuda {
namespace {

struct AverageInputs {
  const float* p[kMaxAverageInputs];
};

}  // namespace

#define TOWERPS_GRID_STRIDE(i, n)                                           \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{gridDim.x} * blockDim.x)

static __global__ void axpy_kernel(int64_t n, float alpha, const float* x, float* y) {
  TOWERPS_GRID_STRIDE(i, n) { y[i] += alpha * x[i]; }
}

static __global__ void scale_kernel(int64_t n, float alpha, float* y) {
  TOWERPS_GRID_STRIDE(i, n) { y[i] *= alpha; }
}

static __global__ void fill_kernel(int64_t n, float value, float* y) {
  TOWERPS_GRID_STRIDE(i, n) { y[i] = value; }
}

static __global__ void average_of_kernel(int k, AverageInputs in, int64_t n, float inv,
                                         float* out) {
  TOWERPS_GRID_STRIDE(i, n) {
    float sum = in.p[0][i];
    for (int j = 1; j < k; ++j) sum = __fadd_rn(sum, in.p[j][i]);  // no contraction
    out[i] = __fmul_rn(sum, inv);
  }
}

static __global__ void momentum_update_kernel(int64_t n, float lr, float momentum,
                                              float weight_decay, const float* g, float* v,
                                              float* p) {
  TOWERPS_GRID_STRIDE(i, n) {
    const float vi = momentum * v[i] + (g[i] + weight_decay * p[i]);
    v[i] = vi;
    p[i] -= lr * vi;
  }
}

#undef TOWERPS_GRID_STRIDE

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

void LaunchFill(int64_t n, float value, float* y, cudaStream_t stream) {
  if (n == 0) return;
  fill_kernel<<<Blocks(n), kThreads, 0, stream>>>(n, value, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchAverageOf(int k, const float* const* in, int64_t n, float* out, cudaStream_t stream) {
  TOWERPS_CHECK(k >= 1 && k <= kMaxAverageInputs)
      << "AverageOf of " << k << " inputs; at most " << kMaxAverageInputs;
  if (n == 0) return;
  AverageInputs inputs{};
  for (int j = 0; j < k; ++j) inputs.p[j] = in[j];
  average_of_kernel<<<Blocks(n), kThreads, 0, stream>>>(k, inputs, n, 1.0f / static_cast<float>(k),
                                                        out);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchMomentumUpdate(int64_t n, float lr, float momentum, float weight_decay, const float* g,
                          float* v, float* p, cudaStream_t stream) {
  if (n == 0) return;
  momentum_update_kernel<<<Blocks(n), kThreads, 0, stream>>>(n, lr, momentum, weight_decay, g, v,
                                                             p);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
