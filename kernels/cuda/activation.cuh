// Activation gradients on the GPU, from the forward output y as Backend::*Backward defines them
// (forward runs through cuDNN in the CUDA backend). cuDNN's cudnnActivationBackward takes x as
// well as y and does not document which one each mode reads, so the backward passes are ours:
//   relu: dx = y > 0 ? dy : 0;  tanh: dx = dy * (1 - y^2);  sigmoid: dx = dy * y * (1 - y).
// Launchers only; device pointers, borrowed; dx may alias dy; queued on `stream`; checked.
#ifndef TOWERPS_KERNELS_CUDA_ACTIVATION_CUH_
#define TOWERPS_KERNELS_CUDA_ACTIVATION_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace towerps::kernels::cuda {

enum class ActivationGradient { kRelu, kTanh, kSigmoid };

void LaunchActivationBackward(ActivationGradient kind, int64_t n, const float* y, const float* dy,
                              float* dx, cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_ACTIVATION_CUH_
