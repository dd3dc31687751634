// Inverted dropout on the GPU (Backend::DropoutForward / DropoutBackward), drawing the same
// DropoutUniform(seed, i) as the CPU (kernels/dropout_hash.h), so masks are bit-identical.
// Launchers only; device pointers, borrowed; queued on `stream`; each launch is checked.
#ifndef TOWERPS_KERNELS_CUDA_DROPOUT_CUH_
#define TOWERPS_KERNELS_CUDA_DROPOUT_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace towerps::kernels::cuda {

// mask[i] = DropoutUniform(seed, i) >= rate ? 1 / (1 - rate) : 0; y[i] = x[i] * mask[i].
// y may alias x.
void LaunchDropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                          float* y, cudaStream_t stream);
// dx = dy * mask; dx may alias dy.
void LaunchDropoutBackward(int64_t n, const float* mask, const float* dy, float* dx,
                           cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_DROPOUT_CUH_
