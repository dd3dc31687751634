// Batch normalization, global average pooling and the residual add on the GPU: the ops of
// kernels/backend.h of the same names. Batch norm's per-channel sums are in double, in pieces
// fixed by the shape (BatchNormSplits), each piece a block with a fixed tree, the pieces then
// added in order: the same bits on every run, within rounding of the CPU's sequential sums.
// Launchers only; device pointers, borrowed; queued on `stream`; every launch is checked.
#ifndef TOWERPS_KERNELS_CUDA_BATCH_NORM_CUH_
#define TOWERPS_KERNELS_CUDA_BATCH_NORM_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace towerps::kernels::cuda {

// How many pieces each channel's sums are split into; `partial` arguments hold
// 2 * c * BatchNormSplits(n, c, hw) doubles of device memory.
int BatchNormSplits(int n, int c, int hw);

void LaunchBatchNormForwardTraining(int n, int c, int hw, float epsilon, const float* x,
                                    const float* gamma, const float* beta, float* y, float* mean,
                                    float* var, float* inv_std, double* partial,
                                    cudaStream_t stream);
void LaunchBatchNormForwardInference(int n, int c, int hw, float epsilon, const float* x,
                                     const float* gamma, const float* beta, const float* mean,
                                     const float* var, float* y, cudaStream_t stream);
// dgamma and dbeta first (one block per channel), then dx from them.
void LaunchBatchNormBackward(int n, int c, int hw, const float* x, const float* dy,
                             const float* gamma, const float* mean, const float* inv_std, float* dx,
                             float* dgamma, float* dbeta, double* partial, cudaStream_t stream);
void LaunchGlobalAvgPoolForward(int n, int c, int hw, const float* x, float* y,
                                cudaStream_t stream);
void LaunchGlobalAvgPoolBackward(int n, int c, int hw, const float* dy, float* dx,
                                 cudaStream_t stream);
// y = a + b; y may alias a or b.
void LaunchAdd(int64_t n, const float* a, const float* b, float* y, cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_BATCH_NORM_CUH_
