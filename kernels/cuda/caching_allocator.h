// CachingAllocator: serves every byte of device memory a CUDA backend uses, from segments it
// takes from the device once and never gives back while it lives, so training does no
// cudaMalloc/cudaFree after warm-up and does not fragment the device.
//
// How: best fit over free blocks (ordered by size, then address) inside the segments; a block
// larger than needed is split, and a freed block merges with free neighbours of its segment.
// Sizes are rounded up to kAlignment bytes.
//  - Without allow_growth, Create() reserves memory_fraction * total bytes as one segment at
//    start (what TensorFlow does by default), so two workers at 0.4 fit on one GPU and a third
//    fails at start-up.
//  - With allow_growth, it starts with nothing and adds segments of at least growth_chunk_bytes
//    when no free block fits, never holding more than memory_fraction * total.
//
// This class is pure bookkeeping: the device calls are injected (RawDeviceMemory), so it is
// tested without a GPU; kernels/cuda/device_memory.h binds it to cudaMalloc and cudaMemGetInfo.
//
// Contract:
//  - Thread-safe (one mutex). Not stream-aware: memory freed here may be handed out at once,
//    which is safe when all work using it is queued on one stream (the backend's compute stream)
//    or has been synchronised; callers on other streams must synchronise before Free.
//  - Errors: kResourceExhausted when a request does not fit under the cap or the device refuses
//    a segment; the message names the device, the fraction, the bytes requested, the bytes in use
//    and reserved, and the memory the device reports free.
//  - Free() of a pointer this allocator did not hand out is a bug (TOWERPS_CHECK).
//  - The destructor returns every segment through RawDeviceMemory::free; memory handed out must
//    not be used after it.
#ifndef TOWERPS_KERNELS_CUDA_CACHING_ALLOCATOR_H_
#define TOWERPS_KERNELS_CUDA_CACHING_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "towerps/result.h"

namespace towerps::kernels::cuda {

struct CachingAllocatorOptions {
  // Share of the device's total memory this allocator may hold, in (0, 1]. 0 (unset, the
  // default) means what TensorFlow does without per_process_gpu_memory_fraction: the memory free
  // at creation less unset_reserve_bytes, left for the CUDA libraries (their kernels load
  // lazily and need device memory later).
  double memory_fraction = 0.0;
  size_t unset_reserve_bytes = size_t{1} << 30;
  // Start small and grow on demand (TensorFlow's allow_growth) instead of reserving the whole
  // share at start.
  bool allow_growth = false;
  // Smallest segment taken when growing (rounded up to kAlignment).
  size_t growth_chunk_bytes = size_t{64} << 20;
  // For messages only: "gpu:0".
  std::string device_name = "gpu:0";

  // kInvalidArgument naming the bad value.
  Status Validate() const;
};

// The device calls the allocator is built on.
struct RawDeviceMemory {
  // Total memory of the device, in bytes.
  size_t total_bytes = 0;
  // Takes `bytes` from the device; kResourceExhausted (or another error) when it cannot.
  std::function<Result<void*>(size_t bytes)> allocate;
  // Gives a pointer from `allocate` back.
  std::function<void(void* p)> free;
  // Memory the device reports free now (for error messages).
  std::function<size_t()> free_bytes;
};

struct AllocatorStats {
  size_t bytes_in_use = 0;       // handed out now (rounded sizes)
  size_t peak_bytes_in_use = 0;  // most ever handed out at once
  size_t bytes_reserved = 0;     // taken from the device (all segments)
  size_t limit_bytes = 0;        // memory_fraction * total (or free less the reserve when unset)
  int64_t num_allocs = 0;        // Allocate calls that returned memory
  int64_t num_segments = 0;      // RawDeviceMemory::allocate calls that succeeded
};

class CachingAllocator {
 public:
  static constexpr size_t kAlignment = 256;  // what cudaMalloc guarantees; enough for cuDNN
  static constexpr size_t kMinSplit = 512;   // smaller remainders stay with the block

  // Without allow_growth, reserves the whole share now; its failure is the out-of-memory error.
  static Result<std::unique_ptr<CachingAllocator>> Create(const CachingAllocatorOptions& options,
                                                          RawDeviceMemory raw);
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // At least `bytes` bytes, aligned to kAlignment. 0 bytes gives a null pointer.
  Result<void*> Allocate(size_t bytes);
  // Returns a pointer from Allocate; null is a no-op.
  void Free(void* p);

  AllocatorStats stats() const;
  const CachingAllocatorOptions& options() const { return options_; }

 private:
  struct Block {
    uintptr_t addr = 0;
    size_t size = 0;
    bool in_use = false;
    int segment = 0;
    Block* prev = nullptr;  // neighbours in the same segment, by address
    Block* next = nullptr;
  };
  using FreeKey = std::pair<size_t, uintptr_t>;  // (size, address): best fit, lowest address

  CachingAllocator(const CachingAllocatorOptions& options, RawDeviceMemory raw, size_t limit);
  // Takes a new segment of `bytes` from the device and adds it as one free block.
  Status AddSegment(size_t bytes, size_t requested) REQUIRES(mu_);
  // `device_refused`: the device itself had too little free (other processes hold it), rather
  // than the fraction being used up; the advice differs.
  Status OutOfMemory(size_t requested, const std::string& why, bool device_refused = false) const
      REQUIRES(mu_);
  void InsertFree(Block* b) REQUIRES(mu_);
  void EraseFree(Block* b) REQUIRES(mu_);

  const CachingAllocatorOptions options_;
  const RawDeviceMemory raw_;
  const size_t limit_;

  mutable Mutex mu_;
  std::vector<void*> segments_ GUARDED_BY(mu_);
  std::set<FreeKey> free_ GUARDED_BY(mu_);
  std::map<uintptr_t, std::unique_ptr<Block>> blocks_ GUARDED_BY(mu_);  // every block, by address
  AllocatorStats stats_ GUARDED_BY(mu_);
};

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_CACHING_ALLOCATOR_H_
