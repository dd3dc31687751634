// Grid sizes for the 1-D grid-stride kernels of kernels/cuda/*.cu. Header-only, device-free.
#ifndef TOWERPS_KERNELS_CUDA_LAUNCH_CONFIG_CUH_
#define TOWERPS_KERNELS_CUDA_LAUNCH_CONFIG_CUH_

#include <cstdint>

namespace towerps::kernels::cuda {

constexpr int kThreads = 256;

// Enough blocks to cover n elements, capped (the kernels stride over the rest).
inline int Blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 16 ? blocks : 65535 * 16);
}

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_LAUNCH_CONFIG_CUH_
