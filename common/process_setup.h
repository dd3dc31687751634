// Process-wide settings that entry points (main functions) apply once at start-up.
#ifndef TOWERPS_COMMON_PROCESS_SETUP_H_
#define TOWERPS_COMMON_PROCESS_SETUP_H_

namespace towerps {

// Keeps large buffers (received tensors, chunk values) in the malloc heap and stops the heap
// from being trimmed, so that a steady stream of same-sized messages reuses memory instead of
// mapping and faulting in fresh pages for every message. Call from main() only. glibc's malloc
// only: in the programs that link tcmalloc (cmake/TowerpsMalloc.cmake) mallopt does nothing,
// and tcmalloc's page heap keeps freed spans for the next message itself.
void ConfigureAllocatorForLargeMessages();

}  // namespace towerps

#endif  // TOWERPS_COMMON_PROCESS_SETUP_H_
