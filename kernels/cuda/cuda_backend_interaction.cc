// CudaBackend's ops for models with several inputs (cuda_backend.h): column blocks of rows,
// embedding lookups and bags, and DLRM's dot interaction, each queued on the compute stream.
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/interaction.cuh"

namespace towerps::kernels {

void CudaBackend::CopyColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride,
                              float* y, int64_t y_stride) {
  impl_->Enter();
  if (rows * width == 0) return;
  TOWERPS_CUDA_CHECK(cudaMemcpy2DAsync(y, sizeof(float) * y_stride, x, sizeof(float) * x_stride,
                                       sizeof(float) * width, rows, cudaMemcpyDeviceToDevice,
                                       impl_->stream.get()));
}

void CudaBackend::AddColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride,
                             float* y, int64_t y_stride) {
  impl_->Enter();
  cuda::LaunchAddColumns(rows, width, x, x_stride, y, y_stride, impl_->stream.get());
}

void CudaBackend::EmbeddingForward(int batch, int fields, int dim, const float* rows,
                                   const uint32_t* index, float* y, int64_t y_stride) {
  impl_->Enter();
  cuda::LaunchEmbeddingForward(batch, fields, dim, rows, index, y, y_stride, impl_->stream.get());
}

void CudaBackend::EmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                                    const uint32_t* positions, const float* dy, int64_t dy_stride,
                                    float* drows) {
  impl_->Enter();
  cuda::LaunchEmbeddingBackward(fields, dim, unique, offsets, positions, dy, dy_stride, drows,
                                impl_->stream.get());
}

void CudaBackend::EmbeddingBagForward(int batch, int dim, const float* rows, const uint32_t* index,
                                      const uint32_t* bags, bool mean, float* y, int64_t y_stride) {
  impl_->Enter();
  cuda::LaunchEmbeddingBagForward(batch, dim, rows, index, bags, mean, y, y_stride,
                                  impl_->stream.get());
}

void CudaBackend::EmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                                       const uint32_t* examples, const uint32_t* bags, bool mean,
                                       const float* dy, int64_t dy_stride, float* drows) {
  impl_->Enter();
  cuda::LaunchEmbeddingBagBackward(dim, unique, offsets, examples, bags, mean, dy, dy_stride, drows,
                                   impl_->stream.get());
}

void CudaBackend::DotInteractionForward(int batch, int k, int d, const float* x, float* y) {
  impl_->Enter();
  cuda::LaunchDotInteractionForward(batch, k, d, x, y, impl_->stream.get());
}

void CudaBackend::DotInteractionBackward(int batch, int k, int d, const float* x, const float* dy,
                                         float* dx) {
  impl_->Enter();
  cuda::LaunchDotInteractionBackward(batch, k, d, x, dy, dx, impl_->stream.get());
}

}  // namespace towerps::kernels
