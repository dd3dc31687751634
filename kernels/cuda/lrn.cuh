// Local response normalization across channels on the GPU, with LrnParams' TensorFlow
// formula (kernels/shapes.h). The CUDA backend uses cuDNN's cross-channel LRN when the
// parameters map onto it (window 2 * depth_radius + 1 <= 16, bias >= 1e-5, beta >= 0.01) and
// these kernels otherwise.
// Launchers only; device pointers x, y, dy, dx [n, c, hw], borrowed; queued on `stream`.
#ifndef TOWERPS_KERNELS_CUDA_LRN_CUH_
#define TOWERPS_KERNELS_CUDA_LRN_CUH_

#include <cuda_runtime.h>

#include "kernels/shapes.h"

namespace towerps::kernels::cuda {

void LaunchLrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y,
                      cudaStream_t stream);
void LaunchLrnBackward(int n, int c, int hw, const LrnParams& p, const float* x, const float* dy,
                       float* dx, cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_LRN_CUH_
