// Huge-page-backed arrays: memory for large arrays read at random, such as a table's rows and its
// id map (ps/server/row_store.h). A lookup of a random row costs a TLB miss as well as a cache
// miss once the arrays span more pages than the TLB holds; with 4 KiB pages a page walk per row
// doubled the cost of an update on a virtual machine (docs/PERFORMANCE.md, "Huge pages, merged
// runs and rows in batches"), and 2 MiB pages cover 512 times as much.
//
// AllocateArray(bytes) of kHugePageBytes or more (unless `huge` is false) maps fresh memory at a 2
// MiB boundary and asks the kernel for transparent huge pages there (madvise MADV_HUGEPAGE), which
// it grants where /sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise" and
// otherwise ignores; smaller arrays, and every array in an ASan or MSan build (so that its checks
// see them), come from operator new. The memory is uninitialised (a mapping reads as zeros, but
// nothing promises it), and its pages are taken only as they are written. ReleaseArray gives it
// back to the system at once (munmap) or to operator delete, as it came.
//
// HugePageAllocator<T> is the same for standard containers: std::vector<T, HugePageAllocator<T>>
// keeps its elements on huge pages once it holds 2 MiB.
//
// Contract: thread-safe (no state). ReleaseArray takes the pointer, byte count and `huge` of one
// AllocateArray. An allocation the system refuses throws std::bad_alloc, as operator new does.
#ifndef TOWERPS_COMMON_HUGE_PAGES_H_
#define TOWERPS_COMMON_HUGE_PAGES_H_

#include <cstddef>

namespace towerps {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// False in an AddressSanitizer or MemorySanitizer build: every array comes from operator new there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kHugePageArrays = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kHugePageArrays = false;
#else
inline constexpr bool kHugePageArrays = true;
#endif
#else
inline constexpr bool kHugePageArrays = true;
#endif

void* AllocateArray(size_t bytes, bool huge = true);
void ReleaseArray(void* p, size_t bytes, bool huge = true);

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: converting, as allocators are

  T* allocate(size_t n) { return static_cast<T*>(AllocateArray(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { ReleaseArray(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace towerps

#endif  // TOWERPS_COMMON_HUGE_PAGES_H_
