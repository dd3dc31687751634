#include "common/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace towerps {
namespace {

bool Mapped(size_t bytes, bool huge) { return kHugePageArrays && huge && bytes >= kHugePageBytes; }

size_t PageRounded(size_t bytes) { return (bytes + 4095) & ~size_t{4095}; }

}  // namespace

void* AllocateArray(size_t bytes, bool huge) {
  if (!Mapped(bytes, huge)) return ::operator new(bytes);
  const size_t size = PageRounded(bytes);
  // Map a huge page more than asked, then unmap what lies before the first 2 MiB boundary and
  // after the array.
  const size_t span = size + kHugePageBytes;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(m);
  const uintptr_t aligned = (start + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  if (aligned > start) munmap(m, aligned - start);
  if (const uintptr_t end = start + span; end > aligned + size) {
    munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  }
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, size, MADV_HUGEPAGE);  // a hint: without THP the array is on 4 KiB pages
  return p;
}

void ReleaseArray(void* p, size_t bytes, bool huge) {
  if (p == nullptr) return;
  if (!Mapped(bytes, huge)) {
    ::operator delete(p);
    return;
  }
  munmap(p, PageRounded(bytes));
}

}  // namespace towerps
