#include "kernels/cuda/caching_allocator.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "towerps/check.h"

namespace towerps::kernels::cuda {
namespace {

size_t RoundUp(size_t bytes, size_t to) { return (bytes + to - 1) / to * to; }

std::string Bytes(size_t b) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%zu bytes (%.1f MiB)", b, static_cast<double>(b) / (1 << 20));
  return buf;
}

}  // namespace

Status CachingAllocatorOptions::Validate() const {
  if (!(memory_fraction >= 0.0 && memory_fraction <= 1.0)) {
    return InvalidArgumentError("--gpu-memory-fraction=" + std::to_string(memory_fraction) +
                                " must be in (0, 1] (or unset)");
  }
  if (growth_chunk_bytes == 0) return InvalidArgumentError("growth_chunk_bytes must be > 0");
  return Status::Ok();
}

CachingAllocator::CachingAllocator(const CachingAllocatorOptions& options, RawDeviceMemory raw,
                                   size_t limit)
    : options_(options), raw_(std::move(raw)), limit_(limit / kAlignment * kAlignment) {
  stats_.limit_bytes = limit_;
}

Result<std::unique_ptr<CachingAllocator>> CachingAllocator::Create(
    const CachingAllocatorOptions& options, RawDeviceMemory raw) {
  TOWERPS_RETURN_IF_ERROR(options.Validate());
  TOWERPS_CHECK(raw.allocate && raw.free && raw.free_bytes);
  size_t limit = 0;
  if (options.memory_fraction > 0) {
    limit = static_cast<size_t>(
        std::floor(options.memory_fraction * static_cast<double>(raw.total_bytes)));
  } else {
    const size_t free = raw.free_bytes();
    limit = free > options.unset_reserve_bytes ? free - options.unset_reserve_bytes : 0;
  }
  std::unique_ptr<CachingAllocator> a(new CachingAllocator(options, std::move(raw), limit));
  if (!options.allow_growth) {
    MutexLock lock(&a->mu_);
    TOWERPS_RETURN_IF_ERROR(a->AddSegment(a->limit_, a->limit_));
  }
  return a;
}

CachingAllocator::~CachingAllocator() {
  MutexLock lock(&mu_);  // no other user remains; the lock documents the access
  for (void* s : segments_) raw_.free(s);
}

Status CachingAllocator::OutOfMemory(size_t requested, const std::string& why,
                                     bool device_refused) const {
  char fraction[64];
  if (options_.memory_fraction > 0) {
    std::snprintf(fraction, sizeof(fraction), "%g", options_.memory_fraction);
  } else {
    std::snprintf(fraction, sizeof(fraction), "unset (the memory free at start less a reserve)");
  }
  return ResourceExhaustedError(
      "out of memory on " + options_.device_name + ": " + why + "; requested " + Bytes(requested) +
      ", in use " + Bytes(stats_.bytes_in_use) + ", reserved " + Bytes(stats_.bytes_reserved) +
      " of the " + Bytes(limit_) + " allowed by --gpu-memory-fraction=" + fraction + " of " +
      Bytes(raw_.total_bytes) + " (" +
      (options_.allow_growth ? "growing" : "reserved at start, no --allow-growth") +
      "); the device reports " + Bytes(raw_.free_bytes()) + " free. " +
      (device_refused ? "Other processes hold the rest: lower --gpu-memory-fraction so that the "
                        "workers sharing this GPU fit together, use --allow-growth, or run fewer "
                        "workers per GPU"
                      : "Lower the batch size, raise --gpu-memory-fraction, or run fewer workers "
                        "per GPU"));
}

Status CachingAllocator::AddSegment(size_t bytes, size_t requested) {
  if (bytes == 0 || stats_.bytes_reserved + bytes > limit_) {
    return OutOfMemory(requested, "the request exceeds the memory fraction");
  }
  Result<void*> p = raw_.allocate(bytes);
  if (!p.ok()) {
    return OutOfMemory(
        requested,
        "the device refused a segment of " + Bytes(bytes) + " (" + p.status().message() + ")",
        /*device_refused=*/true);
  }
  const uintptr_t addr = reinterpret_cast<uintptr_t>(*p);
  TOWERPS_CHECK(addr % kAlignment == 0) << "device memory not aligned to " << kAlignment;
  segments_.push_back(*p);
  auto block = std::make_unique<Block>();
  block->addr = addr;
  block->size = bytes;
  block->segment = static_cast<int>(segments_.size()) - 1;
  Block* b = block.get();
  blocks_.emplace(addr, std::move(block));
  InsertFree(b);
  stats_.bytes_reserved += bytes;
  ++stats_.num_segments;
  return Status::Ok();
}

void CachingAllocator::InsertFree(Block* b) { free_.insert({b->size, b->addr}); }
void CachingAllocator::EraseFree(Block* b) { free_.erase({b->size, b->addr}); }

Result<void*> CachingAllocator::Allocate(size_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  const size_t size = RoundUp(bytes, kAlignment);
  MutexLock lock(&mu_);
  auto it = free_.lower_bound({size, 0});
  if (it == free_.end()) {
    if (!options_.allow_growth) {
      return OutOfMemory(bytes, "no free block of " + Bytes(size) + " is left");
    }
    const size_t room = limit_ - stats_.bytes_reserved;
    if (size > room) return OutOfMemory(bytes, "the request exceeds the memory fraction");
    const size_t chunk =
        std::min(room, std::max(size, RoundUp(options_.growth_chunk_bytes, kAlignment)));
    TOWERPS_RETURN_IF_ERROR(AddSegment(chunk, bytes));
    it = free_.lower_bound({size, 0});
    TOWERPS_CHECK(it != free_.end());
  }
  Block* b = blocks_.at(it->second).get();
  free_.erase(it);
  if (b->size - size >= kMinSplit) {
    auto rest = std::make_unique<Block>();
    rest->addr = b->addr + size;
    rest->size = b->size - size;
    rest->segment = b->segment;
    rest->prev = b;
    rest->next = b->next;
    if (b->next) b->next->prev = rest.get();
    b->next = rest.get();
    b->size = size;
    InsertFree(rest.get());
    blocks_.emplace(rest->addr, std::move(rest));
  }
  b->in_use = true;
  stats_.bytes_in_use += b->size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  ++stats_.num_allocs;
  return reinterpret_cast<void*>(b->addr);
}

void CachingAllocator::Free(void* p) {
  if (p == nullptr) return;
  MutexLock lock(&mu_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
  TOWERPS_CHECK(it != blocks_.end() && it->second->in_use)
      << "Free of a pointer the caching allocator did not hand out (or freed twice)";
  Block* b = it->second.get();
  b->in_use = false;
  stats_.bytes_in_use -= b->size;
  // Merge with free neighbours in the same segment.
  if (Block* n = b->next; n != nullptr && !n->in_use) {
    EraseFree(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    blocks_.erase(n->addr);
  }
  if (Block* prev = b->prev; prev != nullptr && !prev->in_use) {
    EraseFree(prev);
    prev->size += b->size;
    prev->next = b->next;
    if (b->next) b->next->prev = prev;
    blocks_.erase(b->addr);
    b = prev;
  }
  InsertFree(b);
}

AllocatorStats CachingAllocator::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

}  // namespace towerps::kernels::cuda
