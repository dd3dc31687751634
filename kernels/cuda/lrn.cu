#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_config.cuh"
#include "kernels/cuda/lrn.cuh"

namespace towerps::kernels::cuda {

// bias + alpha * sum of x^2 over channels [d - r, d + r] of (b, ., i).
static __device__ float lrn_scale(int c, int hw, int radius, float bias, float alpha,
                                  const float* x_b, int d, int i) {
  float sum = 0.0f;
  const int lo = max(0, d - radius), hi = min(c - 1, d + radius);
  for (int e = lo; e <= hi; ++e) {
    const float v = x_b[int64_t{e} * hw + i];
    sum += v * v;
  }
  return bias + alpha * sum;
}

static __global__ void lrn_forward_kernel(int n, int c, int hw, int radius, float bias, float alpha,
                                          float beta, const float* x, float* y) {
  const int64_t total = int64_t{n} * c * hw;
  for (int64_t at = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; at < total;
       at += int64_t{gridDim.x} * blockDim.x) {
    const int i = static_cast<int>(at % hw);
    const int d = static_cast<int>((at / hw) % c);
    const float* x_b = x + (at / (int64_t{hw} * c)) * c * hw;
    y[at] = x[at] * powf(lrn_scale(c, hw, radius, bias, alpha, x_b, d, i), -beta);
  }
}

// dx_e = dy_e s_e^-beta - 2 alpha beta x_e sum_{d in W(e)} dy_d x_d s_d^(-beta-1)
// (the reference's derivation, kernels/reference/reference_image.cc).
static __global__ void lrn_backward_kernel(int n, int c, int hw, int radius, float bias,
                                           float alpha, float beta, const float* x, const float* dy,
                                           float* dx) {
  const int64_t total = int64_t{n} * c * hw;
  for (int64_t at = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; at < total;
       at += int64_t{gridDim.x} * blockDim.x) {
    const int i = static_cast<int>(at % hw);
    const int e = static_cast<int>((at / hw) % c);
    const int64_t base = (at / (int64_t{hw} * c)) * c * hw;
    const float* x_b = x + base;
    const float* dy_b = dy + base;
    float g = dy[at] * powf(lrn_scale(c, hw, radius, bias, alpha, x_b, e, i), -beta);
    float cross = 0.0f;
    const int lo = max(0, e - radius), hi = min(c - 1, e + radius);
    for (int d = lo; d <= hi; ++d) {
      const int64_t dat = int64_t{d} * hw + i;
      const float sd = lrn_scale(c, hw, radius, bias, alpha, x_b, d, i);
      cross += dy_b[dat] * x_b[dat] * powf(sd, -beta - 1.0f);
    }
    dx[at] = g - 2.0f * alpha * beta * x[at] * cross;
  }
}

void LaunchLrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y,
                      cudaStream_t stream) {
  const int64_t total = int64_t{n} * c * hw;
  if (total == 0) return;
  lrn_forward_kernel<<<Blocks(total), kThreads, 0, stream>>>(n, c, hw, p.depth_radius, p.bias,
                                                             p.alpha, p.beta, x, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchLrnBackward(int n, int c, int hw, const LrnParams& p, const float* x, const float* dy,
                       float* dx, cudaStream_t stream) {
  const int64_t total = int64_t{n} * c * hw;
  if (total == 0) return;
  lrn_backward_kernel<<<Blocks(total), kThreads, 0, stream>>>(n, c, hw, p.depth_radius, p.bias,
                                                              p.alpha, p.beta, x, dy, dx);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
