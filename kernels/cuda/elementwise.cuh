// CUDA versions of kernels/cpu/elementwise.h and the other elementwise ops of Backend<float>.
// Launchers only; pointers are device memory, borrowed; work is queued on `stream` and not
// synchronised. Every launcher checks the launch (cudaGetLastError) and aborts on a failure.
#ifndef TOWERPS_KERNELS_CUDA_ELEMENTWISE_CUH_
#define TOWERPS_KERNELS_CUDA_ELEMENTWISE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace towerps::kernels::cuda {

// Most inputs LaunchAverageOf takes in one launch.
constexpr int kMaxAverageInputs = 16;

// y += alpha * x.
void LaunchAxpy(int64_t n, float alpha, const float* x, float* y, cudaStream_t stream);
// y *= alpha.
void LaunchScale(int64_t n, float alpha, float* y, cudaStream_t stream);
// y = value.
void LaunchFill(int64_t n, float value, float* y, cudaStream_t stream);
// out = (in[0] + ... + in[k-1]) * (1 / k), summed in index order in float, as the CPU does
// (bitwise equal to it). `in` is a host array of k <= kMaxAverageInputs device pointers on the
// stream's device; out may alias in[0].
void LaunchAverageOf(int k, const float* const* in, int64_t n, float* out, cudaStream_t stream);
// v = momentum * v + (g + weight_decay * p); p -= lr * v.
void LaunchMomentumUpdate(int64_t n, float lr, float momentum, float weight_decay, const float* g,
                          float* v, float* p, cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_ELEMENTWISE_CUH_
