#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_config.cuh"
#include "kernels/cuda/pooling.cuh"

namespace towerps::kernels::cuda {
namespace {

// Pool2dShape's fields, as a plain struct passed to the kernels by value.
struct Geometry {
  int n, c, h, w;
  int window_h, window_w, stride_h, stride_w, pad_h, pad_w;
  int out_h, out_w;
};

Geometry ToGeometry(const Pool2dShape& s) {
  return {s.n,        s.c,        s.h,     s.w,     s.window_h, s.window_w,
          s.stride_h, s.stride_w, s.pad_h, s.pad_w, s.out_h,    s.out_w};
}

}  // namespace

// Index (in the [h, w] plane) of the first maximum of output (oy, ox)'s window over `plane`;
// padded positions are skipped. Every window overlaps the input (Pool2dShape::Validate).
static __device__ int first_max_in_window(const Geometry& g, const float* plane, int oy, int ox) {
  const int y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
  int best = -1;
  float best_value = 0.0f;
  for (int i = 0; i < g.window_h; ++i) {
    const int iy = y0 + i;
    if (iy < 0 || iy >= g.h) continue;
    for (int j = 0; j < g.window_w; ++j) {
      const int ix = x0 + j;
      if (ix < 0 || ix >= g.w) continue;
      const float v = plane[iy * g.w + ix];
      if (best < 0 || v > best_value) {
        best = iy * g.w + ix;
        best_value = v;
      }
    }
  }
  return best;
}

// Number of input positions in output (oy, ox)'s window (padding not counted).
static __device__ int window_count(const Geometry& g, int oy, int ox) {
  const int y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
  const int y1 = min(y0 + g.window_h, g.h), x1 = min(x0 + g.window_w, g.w);
  return (y1 - max(y0, 0)) * (x1 - max(x0, 0));
}

// The outputs whose windows cover input row iy: [*lo, *hi] (empty when lo > hi).
static __device__ void covering(int i, int pad, int window, int stride, int out, int* lo, int* hi) {
  const int first = i + pad - window + 1;
  *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
  *hi = min(out - 1, (i + pad) / stride);
}

static __global__ void max_pool_forward_kernel(Geometry g, const float* x, float* y) {
  const int64_t total = int64_t{g.n} * g.c * g.out_h * g.out_w;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int ox = static_cast<int>(o % g.out_w);
    const int oy = static_cast<int>((o / g.out_w) % g.out_h);
    const int64_t plane_index = o / (int64_t{g.out_w} * g.out_h);  // n * c + c
    const float* plane = x + plane_index * g.h * g.w;
    y[o] = plane[first_max_in_window(g, plane, oy, ox)];
  }
}

static __global__ void max_pool_backward_kernel(Geometry g, const float* x, const float* dy,
                                                float* dx) {
  const int64_t total = int64_t{g.n} * g.c * g.h * g.w;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int ix = static_cast<int>(i % g.w);
    const int iy = static_cast<int>((i / g.w) % g.h);
    const int64_t plane_index = i / (int64_t{g.w} * g.h);
    const float* plane = x + plane_index * g.h * g.w;
    const float* dy_plane = dy + plane_index * g.out_h * g.out_w;
    int oy0, oy1, ox0, ox1;
    covering(iy, g.pad_h, g.window_h, g.stride_h, g.out_h, &oy0, &oy1);
    covering(ix, g.pad_w, g.window_w, g.stride_w, g.out_w, &ox0, &ox1);
    const int me = iy * g.w + ix;
    float sum = 0.0f;
    for (int oy = oy0; oy <= oy1; ++oy)
      for (int ox = ox0; ox <= ox1; ++ox) {
        if (first_max_in_window(g, plane, oy, ox) == me) sum += dy_plane[oy * g.out_w + ox];
      }
    dx[i] = sum;
  }
}

static __global__ void avg_pool_forward_kernel(Geometry g, const float* x, float* y) {
  const int64_t total = int64_t{g.n} * g.c * g.out_h * g.out_w;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int ox = static_cast<int>(o % g.out_w);
    const int oy = static_cast<int>((o / g.out_w) % g.out_h);
    const float* plane = x + (o / (int64_t{g.out_w} * g.out_h)) * g.h * g.w;
    const int y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
    float sum = 0.0f;
    for (int iy = max(y0, 0); iy < min(y0 + g.window_h, g.h); ++iy)
      for (int ix = max(x0, 0); ix < min(x0 + g.window_w, g.w); ++ix) sum += plane[iy * g.w + ix];
    y[o] = sum / static_cast<float>(window_count(g, oy, ox));
  }
}

static __global__ void avg_pool_backward_kernel(Geometry g, const float* dy, float* dx) {
  const int64_t total = int64_t{g.n} * g.c * g.h * g.w;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int ix = static_cast<int>(i % g.w);
    const int iy = static_cast<int>((i / g.w) % g.h);
    const float* dy_plane = dy + (i / (int64_t{g.w} * g.h)) * g.out_h * g.out_w;
    int oy0, oy1, ox0, ox1;
    covering(iy, g.pad_h, g.window_h, g.stride_h, g.out_h, &oy0, &oy1);
    covering(ix, g.pad_w, g.window_w, g.stride_w, g.out_w, &ox0, &ox1);
    float sum = 0.0f;
    for (int oy = oy0; oy <= oy1; ++oy)
      for (int ox = ox0; ox <= ox1; ++ox) {
        sum += dy_plane[oy * g.out_w + ox] / static_cast<float>(window_count(g, oy, ox));
      }
    dx[i] = sum;
  }
}

void LaunchMaxPoolForward(const Pool2dShape& s, const float* x, float* y, cudaStream_t stream) {
  const int64_t total = s.y_size();
  if (total == 0) return;
  max_pool_forward_kernel<<<Blocks(total), kThreads, 0, stream>>>(ToGeometry(s), x, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchMaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy, float* dx,
                           cudaStream_t stream) {
  const int64_t total = s.x_size();
  if (total == 0) return;
  max_pool_backward_kernel<<<Blocks(total), kThreads, 0, stream>>>(ToGeometry(s), x, dy, dx);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchAvgPoolForward(const Pool2dShape& s, const float* x, float* y, cudaStream_t stream) {
  const int64_t total = s.y_size();
  if (total == 0) return;
  avg_pool_forward_kernel<<<Blocks(total), kThreads, 0, stream>>>(ToGeometry(s), x, y);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

void LaunchAvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx, cudaStream_t stream) {
  const int64_t total = s.x_size();
  if (total == 0) return;
  avg_pool_backward_kernel<<<Blocks(total), kThreads, 0, stream>>>(ToGeometry(s), dy, dx);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
