// Convolution on the CPU by im2col + OpenBLAS sgemm, one image per GEMM, images split over the
// pool: the path for the shapes the ConvPlanner does not give to oneDNN (conv_planner.h).
//
// Contract: as the Backend<float> op of the same name (kernels/backend.h), on host pointers
// borrowed for the call; `ctx` is the calling CpuBackend's (one op at a time).
#ifndef TOWERPS_KERNELS_CPU_CONV_H_
#define TOWERPS_KERNELS_CPU_CONV_H_

#include <cstdint>

#include "kernels/cpu/cpu_context.h"
#include "kernels/shapes.h"

namespace towerps::kernels::cpu {

void Conv2dForward(CpuContext& ctx, const Conv2dShape& s, const float* x, const float* w, float* y);
void Conv2dBackwardData(CpuContext& ctx, const Conv2dShape& s, const float* dy, const float* w,
                        float* dx);
void Conv2dBackwardFilter(CpuContext& ctx, const Conv2dShape& s, const float* x, const float* dy,
                          float* dw);

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_CONV_H_
