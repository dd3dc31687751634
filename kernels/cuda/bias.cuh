// Bias add and its gradient on the GPU (Backend::BiasAdd / BiasBackward). Launchers only;
// device pointers, borrowed; queued on `stream`; each launch is checked.
#ifndef TOWERPS_KERNELS_CUDA_BIAS_CUH_
#define TOWERPS_KERNELS_CUDA_BIAS_CUH_

#include <cuda_runtime.h>

namespace towerps::kernels::cuda {

// y[o, ch, i] += bias[ch] for y viewed as [outer, channels, inner].
void LaunchBiasAdd(int outer, int channels, int inner, const float* bias, float* y,
                   cudaStream_t stream);
// db[ch] = sum over o, i of dy[o, ch, i]. Deterministic (no atomics): a fixed reduction order.
void LaunchBiasBackward(int outer, int channels, int inner, const float* dy, float* db,
                        cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_BIAS_CUH_
