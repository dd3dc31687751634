// Max and average pooling on the GPU (Backend::MaxPool* / AvgPool*), with exactly the CPU
// reference's semantics, which cuDNN's pooling descriptors cannot express: Pool2dShape pads
// only at the top/left (the bottom/right padding is whatever out_h/out_w imply, TensorFlow
// 'SAME'), padded positions never win a max and are not counted by an average, and max-pool
// backward routes each window's gradient to the first maximum in row-major window order.
// Backward kernels run one thread per input element and gather from the windows that cover it,
// so they need no atomics and are deterministic.
// Launchers only; device pointers, borrowed; queued on `stream`; each launch is checked.
#ifndef TOWERPS_KERNELS_CUDA_POOLING_CUH_
#define TOWERPS_KERNELS_CUDA_POOLING_CUH_

#include <cuda_runtime.h>

#include "kernels/shapes.h"

namespace towerps::kernels::cuda {

void LaunchMaxPoolForward(const Pool2dShape& s, const float* x, float* y, cudaStream_t stream);
void LaunchMaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy, float* dx,
                           cudaStream_t stream);
void LaunchAvgPoolForward(const Pool2dShape& s, const float* x, float* y, cudaStream_t stream);
void LaunchAvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx, cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_POOLING_CUH_
