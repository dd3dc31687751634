// CUDA versions of Backend<float>'s column blocks (the adding half; copies are
// cudaMemcpy2DAsync in the backend), embedding lookups and DLRM's dot interaction.
// Launchers only; pointers are device memory, borrowed; work is queued on `stream` and not
// synchronised. Every launcher checks the launch and aborts on a failure.
//
// Determinism: one thread per output element, each summing its terms in a fixed order (no
// atomics), so results are the same on every run.
#ifndef TOWERPS_KERNELS_CUDA_INTERACTION_CUH_
#define TOWERPS_KERNELS_CUDA_INTERACTION_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace towerps::kernels::cuda {

// y[r * y_stride + j] += x[r * x_stride + j] for r < rows, j < width.
void LaunchAddColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                      int64_t y_stride, cudaStream_t stream);
// Backend::EmbeddingForward: one thread per element of y's [batch, fields * dim] block.
void LaunchEmbeddingForward(int batch, int fields, int dim, const float* rows,
                            const uint32_t* index, float* y, int64_t y_stride, cudaStream_t stream);
// Backend::EmbeddingBackward: one thread per element of drows, summing the row's uses in order.
void LaunchEmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                             const uint32_t* positions, const float* dy, int64_t dy_stride,
                             float* drows, cudaStream_t stream);
// Backend::EmbeddingBagForward: one thread per element of y's [batch, dim] block, summing the
// example's uses in order.
void LaunchEmbeddingBagForward(int batch, int dim, const float* rows, const uint32_t* index,
                               const uint32_t* bags, bool mean, float* y, int64_t y_stride,
                               cudaStream_t stream);
// Backend::EmbeddingBagBackward: one thread per element of drows, summing the row's uses in
// order.
void LaunchEmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                                const uint32_t* examples, const uint32_t* bags, bool mean,
                                const float* dy, int64_t dy_stride, float* drows,
                                cudaStream_t stream);
// Backend::DotInteractionForward: x [batch, k, d], y [batch, d + k(k-1)/2].
void LaunchDotInteractionForward(int batch, int k, int d, const float* x, float* y,
                                 cudaStream_t stream);
// Backend::DotInteractionBackward: dx [batch, k, d] from dy and x; element (i, e) of dx sums
// dy's first block (i = 0) and its pairs with every other vector, partner by partner in order.
void LaunchDotInteractionBackward(int batch, int k, int d, const float* x, const float* dy,
                                  float* dx, cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_INTERACTION_CUH_
