// DropoutUniform: the uniform number dropout draws per element, shared by every backend.
//
// Contract: a pure function, usable from host code and, under nvcc, from device code (it is
// marked __host__ __device__ only when compiled by nvcc), so the CPU and the CUDA backends draw
// bit-identical masks. This header depends on nothing but <cstdint> so .cu files (C++17) can
// include it.
#ifndef TOWERPS_KERNELS_DROPOUT_HASH_H_
#define TOWERPS_KERNELS_DROPOUT_HASH_H_

#include <cstdint>

#ifdef __CUDACC__
#define TOWERPS_HOST_DEVICE __host__ __device__
#else
#define TOWERPS_HOST_DEVICE
#endif

namespace towerps::kernels {

// The uniform number in [0, 1) that dropout draws for element `index` under `seed`: a
// counter-based hash (SplitMix64), so every backend draws the same mask. Integer arithmetic
// and one exact conversion (24 bits into a float), so host and device agree bit for bit.
TOWERPS_HOST_DEVICE inline float DropoutUniform(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // 24 bits
}

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_DROPOUT_HASH_H_
