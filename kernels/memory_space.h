// MemorySpace: the memory a backend computes on, and the copies in and out of it, so callers
// (layers, models, tests) can work with any backend without knowing its device. Every Backend<T>
// is a MemorySpace (kernels/backend.h); BackendBuffer (kernels/backend_buffer.h) owns memory
// from one.
//
// Contract:
//  - host_memory() is true when the backend's pointers are ordinary host pointers (CPU,
//    reference): callers may then read and write them directly and skip every copy. It never
//    changes over an object's life.
//  - Work on a backend is queued in call order (ops and copies alike, on one stream for CUDA).
//    Allocate, Free and the copies follow that order: memory freed after the ops that use it
//    may be handed out again at once, because anything that uses it later is queued later.
//  - CopyFromHost returns once `host` may be reused; CopyToHost returns once the bytes are in
//    host memory (it waits for the work queued before it). Copy stays on the backend.
//  - Pointers are borrowed; ranges must not overlap. A null pointer is allowed with 0 bytes.
//  - Errors: Allocate returns kResourceExhausted when the backend's memory (or the share of it
//    it was configured to take) is used up; the message says how many bytes were asked for and
//    what is free. A failing copy is a bug or a dead device and aborts.
//  - Not thread-safe, like the backend: one caller at a time.
#ifndef TOWERPS_KERNELS_MEMORY_SPACE_H_
#define TOWERPS_KERNELS_MEMORY_SPACE_H_

#include <cstddef>
#include <cstdint>
#include <optional>

#include "towerps/result.h"

namespace towerps::kernels {

class MemorySpace {
 public:
  virtual ~MemorySpace() = default;

  virtual bool host_memory() const = 0;
  // `bytes` of backend memory, aligned to at least 64 bytes; null for 0 bytes.
  virtual Result<void*> Allocate(size_t bytes) = 0;
  // Returns memory from Allocate of this object; null is a no-op.
  virtual void Free(void* p) = 0;
  virtual void CopyFromHost(const void* host, size_t bytes, void* dst) = 0;
  virtual void CopyToHost(const void* src, size_t bytes, void* host) = 0;
  virtual void Copy(const void* src, size_t bytes, void* dst) = 0;
  // Waits until every queued op and copy has finished (a no-op for synchronous backends).
  virtual void Synchronize() = 0;

  // ---- Overlapping copies with compute (optional; the defaults are synchronous) ----
  // Queues a copy from host memory after the work queued so far and may return before it is
  // done: `host` must stay untouched until the queued work has finished (CopyToHost,
  // Synchronize, or WaitCopy of a ticket taken later). `host` should be pinned.
  virtual void CopyFromHostAsync(const void* host, size_t bytes, void* dst) {
    CopyFromHost(host, bytes, dst);
  }
  // Queues a copy of `bytes` from `src` to `host` after the work queued so far, on a separate
  // copy stream where there is one, and returns a ticket for WaitCopy. `src` must not be
  // written and `host` not touched until WaitCopy(ticket) has returned; every ticket must be
  // waited for. `host` should be pinned (PinHostMemory) or the copy may block.
  virtual uint64_t CopyToHostAsync(const void* src, size_t bytes, void* host) {
    CopyToHost(src, bytes, host);
    return 0;
  }
  virtual void WaitCopy(uint64_t /*ticket*/) {}
  // Page-locks a host range for fast asynchronous copies (a no-op on host backends; failure is
  // not an error, copies are just slower). Unpin it before it is freed.
  virtual void PinHostMemory(void* /*host*/, size_t /*bytes*/) {}
  virtual void UnpinHostMemory(void* /*host*/) {}

  // ---- Copies between devices (optional; host spaces never need them) ----
  // True when CopyFromPeer(peer, ...) works: both are device memory of one kind (two GPUs).
  virtual bool CanCopyFromPeer(const MemorySpace& /*peer*/) const { return false; }
  // Copies `bytes` from `src` in `peer`'s memory into `dst` in this one, after the work queued
  // on both so far; later work on this space sees the data. Only where CanCopyFromPeer(peer);
  // otherwise it aborts. `peer` is borrowed. The one call that may run while another thread
  // uses `peer`: it covers the work queued on `peer` before the call, which the caller orders
  // (e.g. the other thread says it has queued it).
  virtual void CopyFromPeer(MemorySpace& peer, const void* src, size_t bytes, void* dst);

  // What a device space has reserved and used, for logs; empty for host memory.
  struct DeviceMemoryStats {
    uint64_t peak_bytes_in_use = 0;
    uint64_t bytes_reserved = 0;
    uint64_t limit_bytes = 0;
  };
  virtual std::optional<DeviceMemoryStats> device_memory_stats() const { return std::nullopt; }
};

// The MemorySpace of host backends: 64-byte aligned heap memory and memcpy. Thread-compatible.
class HostMemorySpace : public virtual MemorySpace {
 public:
  bool host_memory() const override { return true; }
  Result<void*> Allocate(size_t bytes) override;
  void Free(void* p) override;
  void CopyFromHost(const void* host, size_t bytes, void* dst) override;
  void CopyToHost(const void* src, size_t bytes, void* host) override;
  void Copy(const void* src, size_t bytes, void* dst) override;
  void Synchronize() override {}
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_MEMORY_SPACE_H_
