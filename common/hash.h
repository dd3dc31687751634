// FNV-1a, 64 bit: the hash behind job fingerprints and model signatures, which every process of a
// job computes and compares, so it must be the same everywhere. Not cryptographic.
//
// Contract: pure functions; thread-safe.
#ifndef TOWERPS_COMMON_HASH_H_
#define TOWERPS_COMMON_HASH_H_

#include <cstddef>
#include <cstdint>

namespace towerps {

inline constexpr uint64_t kFnv1aOffsetBasis = 0xcbf29ce484222325ull;  // 14695981039346656037
inline constexpr uint64_t kFnv1aPrime = 0x100000001b3ull;             // 1099511628211

// Hashes `size` bytes at `data`, continuing from `seed`: the offset basis starts a new hash, a
// previous result appends to it.
inline uint64_t Fnv1a(const void* data, size_t size, uint64_t seed = kFnv1aOffsetBasis) {
  uint64_t h = seed;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= kFnv1aPrime;
  }
  return h;
}

// Appends the 8 bytes of `value`, least significant first, whatever the host's byte order.
inline uint64_t Fnv1aU64(uint64_t value, uint64_t seed) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  return Fnv1a(bytes, sizeof(bytes), seed);
}

}  // namespace towerps

#endif  // TOWERPS_COMMON_HASH_H_
