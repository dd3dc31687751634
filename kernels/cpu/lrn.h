// Local response normalization across channels on the CPU.
//
// Contract: as the Backend<float> op of the same name (kernels/backend.h), on host pointers
// borrowed for the call; `ctx` is the calling CpuBackend's (one op at a time).
#ifndef TOWERPS_KERNELS_CPU_LRN_H_
#define TOWERPS_KERNELS_CPU_LRN_H_

#include <cstdint>

#include "kernels/cpu/cpu_context.h"
#include "kernels/shapes.h"

namespace towerps::kernels::cpu {

void LrnForward(CpuContext& ctx, int n, int c, int hw, const LrnParams& p, const float* x,
                float* y);
void LrnBackward(CpuContext& ctx, int n, int c, int hw, const LrnParams& p, const float* x,
                 const float* dy, float* dx);

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_LRN_H_
