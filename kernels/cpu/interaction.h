// Column blocks, embedding lookups and bags, and DLRM's dot interaction on the CPU (their
// gradients summed in the order kernels/embedding_uses.h fixes).
//
// Contract: as the Backend<float> op of the same name (kernels/backend.h), on host pointers
// borrowed for the call; `ctx` is the calling CpuBackend's (one op at a time).
#ifndef TOWERPS_KERNELS_CPU_INTERACTION_H_
#define TOWERPS_KERNELS_CPU_INTERACTION_H_

#include <cstdint>

#include "kernels/cpu/cpu_context.h"
#include "kernels/shapes.h"

namespace towerps::kernels::cpu {

void CopyColumns(CpuContext& ctx, int64_t rows, int64_t width, const float* x, int64_t x_stride,
                 float* y, int64_t y_stride);
void AddColumns(CpuContext& ctx, int64_t rows, int64_t width, const float* x, int64_t x_stride,
                float* y, int64_t y_stride);
void EmbeddingForward(CpuContext& ctx, int batch, int fields, int dim, const float* rows,
                      const uint32_t* index, float* y, int64_t y_stride);
void EmbeddingBackward(CpuContext& ctx, int fields, int dim, int64_t unique,
                       const uint32_t* offsets, const uint32_t* positions, const float* dy,
                       int64_t dy_stride, float* drows);
void EmbeddingBagForward(CpuContext& ctx, int batch, int dim, const float* rows,
                         const uint32_t* index, const uint32_t* bags, bool mean, float* y,
                         int64_t y_stride);
void EmbeddingBagBackward(CpuContext& ctx, int dim, int64_t unique, const uint32_t* offsets,
                          const uint32_t* examples, const uint32_t* bags, bool mean,
                          const float* dy, int64_t dy_stride, float* drows);
void DotInteractionForward(CpuContext& ctx, int batch, int k, int d, const float* x, float* y);
void DotInteractionBackward(CpuContext& ctx, int batch, int k, int d, const float* x,
                            const float* dy, float* dx);

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_INTERACTION_H_
