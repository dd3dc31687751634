#include <algorithm>
#include <cstdint>

#include "kernels/cuda/conv_filter_gemm.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_config.cuh"
#include "kernels/cuda/library_check.h"

namespace towerps::kernels::cuda {

// The convolution's sizes, as the device needs them (Conv2dShape's methods are host code).
struct Im2colShape {
  int c, h, w, r, s, stride_h, stride_w, pad_h, pad_w, out_h, out_w;
};

// col[i][crs][pq] for images first..first+images-1 (i counted from first): the input under
// filter tap (c, r, s) at output position (p, q), 0 in the padding. Consecutive threads take
// consecutive q: coalesced writes, and reads strided by the convolution's stride.
static __global__ void im2col_kernel(Im2colShape s, const float* x, int first, int images,
                                     float* col) {
  const int64_t pq = int64_t{s.out_h} * s.out_w;
  const int64_t per_image = int64_t{s.c} * s.r * s.s * pq;
  const int64_t total = per_image * images;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t image = i / per_image;
    int64_t rest = i % per_image;
    const int64_t crs = rest / pq;
    rest %= pq;
    const int p = static_cast<int>(rest / s.out_w), q = static_cast<int>(rest % s.out_w);
    const int c = static_cast<int>(crs / (s.r * s.s));
    const int r = static_cast<int>(crs / s.s % s.r), t = static_cast<int>(crs % s.s);
    const int h = p * s.stride_h - s.pad_h + r, w = q * s.stride_w - s.pad_w + t;
    float v = 0.0f;
    if (h >= 0 && h < s.h && w >= 0 && w < s.w) {
      v = x[((first + image) * s.c + c) * int64_t{s.h} * s.w + int64_t{h} * s.w + w];
    }
    col[i] = v;
  }
}

// dw[e] = partial[0][e] + ... + partial[n-1][e], in that order.
static __global__ void sum_partials_kernel(int64_t elements, int n, const float* partial,
                                           float* dw) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < elements;
       e += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum += partial[i * elements + e];
    dw[e] = sum;
  }
}

void FilterGradientAsGemm(const Conv2dShape& s, const float* x, const float* dy, float* dw,
                          float* workspace, int images_per_pass, cublasHandle_t cublas,
                          cudaStream_t stream) {
  const int pq = s.out_h() * s.out_w();
  const int crs = s.c * s.r * s.s;
  const int64_t filter = int64_t{s.k} * crs;
  float* partial = workspace;                      // [n][k][crs]
  float* col = workspace + int64_t{s.n} * filter;  // [images_per_pass][crs][pq]
  const Im2colShape shape{s.c,        s.h,     s.w,     s.r,       s.s,      s.stride_h,
                          s.stride_w, s.pad_h, s.pad_w, s.out_h(), s.out_w()};
  const float one = 1.0f, zero = 0.0f;
  for (int first = 0; first < s.n; first += images_per_pass) {
    const int images = std::min(images_per_pass, s.n - first);
    const int64_t patches = int64_t{images} * crs * pq;
    im2col_kernel<<<Blocks(patches), kThreads, 0, stream>>>(shape, x, first, images, col);
    TOWERPS_CUDA_CHECK_LAUNCH();
    // Column-major, per image: partial^T (crs x k) = col (stored crs x pq, row-major: a
    // column-major pq x crs matrix, transposed) * dy^T (dy[n] is k x pq row-major: column-major
    // pq x k).
    TOWERPS_CUBLAS_CHECK(cublasSgemmStridedBatched(
        cublas, CUBLAS_OP_T, CUBLAS_OP_N, crs, s.k, pq, &one, col, pq, int64_t{crs} * pq,
        dy + int64_t{first} * s.k * pq, pq, int64_t{s.k} * pq, &zero, partial + first * filter, crs,
        filter, images));
  }
  sum_partials_kernel<<<Blocks(filter), kThreads, 0, stream>>>(filter, s.n, partial, dw);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
