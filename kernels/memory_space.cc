#include "kernels/memory_space.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "towerps/check.h"

namespace towerps::kernels {

void MemorySpace::CopyFromPeer(MemorySpace& peer, const void* /*src*/, size_t /*bytes*/,
                               void* /*dst*/) {
  TOWERPS_CHECK(CanCopyFromPeer(peer)) << "CopyFromPeer between spaces that cannot copy";
}

Result<void*> HostMemorySpace::Allocate(size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  constexpr size_t kAlign = 64;
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (p == nullptr) {
    return ResourceExhaustedError("host allocation of " + std::to_string(bytes) + " bytes failed");
  }
  return p;
}

void HostMemorySpace::Free(void* p) { std::free(p); }

void HostMemorySpace::CopyFromHost(const void* host, size_t bytes, void* dst) {
  if (bytes) std::memcpy(dst, host, bytes);
}

void HostMemorySpace::CopyToHost(const void* src, size_t bytes, void* host) {
  if (bytes) std::memcpy(host, src, bytes);
}

void HostMemorySpace::Copy(const void* src, size_t bytes, void* dst) {
  if (bytes) std::memcpy(dst, src, bytes);
}

}  // namespace towerps::kernels
