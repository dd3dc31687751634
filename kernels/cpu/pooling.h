// Max and average pooling on the CPU: direct loops, (image, channel) planes split over the pool.
//
// Contract: as the Backend<float> op of the same name (kernels/backend.h), on host pointers
// borrowed for the call; `ctx` is the calling CpuBackend's (one op at a time).
#ifndef TOWERPS_KERNELS_CPU_POOLING_H_
#define TOWERPS_KERNELS_CPU_POOLING_H_

#include <cstdint>

#include "kernels/cpu/cpu_context.h"
#include "kernels/shapes.h"

namespace towerps::kernels::cpu {

void MaxPoolForward(CpuContext& ctx, const Pool2dShape& s, const float* x, float* y);
void MaxPoolBackward(CpuContext& ctx, const Pool2dShape& s, const float* x, const float* dy,
                     float* dx);
void AvgPoolForward(CpuContext& ctx, const Pool2dShape& s, const float* x, float* y);
void AvgPoolBackward(CpuContext& ctx, const Pool2dShape& s, const float* dy, float* dx);

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_POOLING_H_
