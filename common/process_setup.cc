#include "common/process_setup.h"

#include <malloc.h>

namespace towerps {

void ConfigureAllocatorForLargeMessages() {
  // glibc serves allocations above M_MMAP_THRESHOLD with a fresh mmap, and returns heap memory
  // above M_TRIM_THRESHOLD to the kernel; both turn every 1 MiB message into 256 page faults.
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace towerps
