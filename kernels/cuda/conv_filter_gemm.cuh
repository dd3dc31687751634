// A convolution's filter gradient as im2col and one batched GEMM (Backend::Conv2dBackwardFilter
// on the CUDA backend, when the ConvPlanner chooses it).
//
// cuDNN's one deterministic, non-transform backward-filter algorithm (BWD_FILTER_ALGO_1) reduces
// over every output position of the batch at under 1 TFLOP/s on the few-channel convolutions of
// the zoo's models (cifar10's conv1, ResNet-20's 16- and 32-channel stages): it was most of their
// backward pass on an H100 and an H200. Here, for each image n of the batch,
//     partial[n] (k x c*r*s) = dy[n] (k x p*q) * col[n] (p*q x c*r*s)
// is one problem of a cuBLAS strided-batched GEMM, col[n] being image n's patches (im2col, stored
// c*r*s x p*q so that both its reads and its writes are coalesced), and then
//     dw = partial[0] + partial[1] + ... + partial[n-1],
// summed in that order by one thread per filter element. No atomics: the same inputs give the
// same bits on every run. Each sum is short (p*q terms inside a GEMM, then n), so the float32
// error stays at about 1e-6 of the result, as the direct algorithms'.
//
// Contract: device pointers, borrowed; queued on `stream`, which must be `cublas`'s stream;
// cuBLAS in strict float32 unless the handle allows TF32. `workspace` holds
// FilterGemmWorkspaceFloats(s, images_per_pass) floats; images are taken `images_per_pass` at a
// time (1 to s.n), so a large batch needs no workspace for all its patches at once.
#ifndef TOWERPS_KERNELS_CUDA_CONV_FILTER_GEMM_CUH_
#define TOWERPS_KERNELS_CUDA_CONV_FILTER_GEMM_CUH_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/shapes.h"

namespace towerps::kernels::cuda {

// Floats of workspace: every image's partial gradient, then one pass's patches.
inline int64_t FilterGemmWorkspaceFloats(const Conv2dShape& s, int images_per_pass) {
  const int64_t patch = int64_t{s.c} * s.r * s.s;
  return int64_t{s.n} * s.k * patch + int64_t{images_per_pass} * patch * s.out_h() * s.out_w();
}

// dw [k, c, r, s] = the gradient of the cross-correlation y = x * w with respect to w, for x
// [n, c, h, w] and dy [n, k, out_h, out_w] (NCHW), overwriting dw.
void FilterGradientAsGemm(const Conv2dShape& s, const float* x, const float* dy, float* dw,
                          float* workspace, int images_per_pass, cublasHandle_t cublas,
                          cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_CONV_FILTER_GEMM_CUH_
