// Batch normalization (a channel per piece of the pool, summed in double in a fixed order, so
// that the results do not depend on the thread count), global average pooling and the residual
// add on the CPU.
//
// Contract: as the Backend<float> op of the same name (kernels/backend.h), on host pointers
// borrowed for the call; `ctx` is the calling CpuBackend's (one op at a time).
#ifndef TOWERPS_KERNELS_CPU_BATCH_NORM_H_
#define TOWERPS_KERNELS_CPU_BATCH_NORM_H_

#include <cstdint>

#include "kernels/cpu/cpu_context.h"
#include "kernels/shapes.h"

namespace towerps::kernels::cpu {

void BatchNormForwardTraining(CpuContext& ctx, int n, int c, int hw, float epsilon, const float* x,
                              const float* gamma, const float* beta, float* y, float* mean,
                              float* var, float* inv_std);
void BatchNormForwardInference(CpuContext& ctx, int n, int c, int hw, float epsilon, const float* x,
                               const float* gamma, const float* beta, const float* mean,
                               const float* var, float* y);
void BatchNormBackward(CpuContext& ctx, int n, int c, int hw, const float* x, const float* dy,
                       const float* gamma, const float* mean, const float* inv_std, float* dx,
                       float* dgamma, float* dbeta);
void GlobalAvgPoolForward(CpuContext& ctx, int n, int c, int hw, const float* x, float* y);
void GlobalAvgPoolBackward(CpuContext& ctx, int n, int c, int hw, const float* dy, float* dx);
void Add(CpuContext& ctx, int64_t n, const float* a, const float* b, float* y);

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_BATCH_NORM_H_
