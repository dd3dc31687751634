// DeviceSpace: one GPU's memory as the CUDA backend's MemorySpace side (kernels/memory_space.h)
// serves it: allocation from the backend's CachingAllocator, the copies in, out, within and
// between devices, copy tickets, and host pinning. Internal to kernels/cuda; CudaBackend forwards
// its MemorySpace calls here.
//
// How: every copy is cudaMemcpyAsync on the compute stream, except CopyToHostAsync, which goes
// on a second (copy) stream after an event recorded on the compute stream, so that it overlaps
// the compute work queued after it; its ticket is the pair of events (ready, done).
//
// Contract:
//  - The compute stream is borrowed (the backend owns it) and must outlive this object; the copy
//    stream and the allocator are owned. Memory from Allocate and the copies' pointers follow
//    MemorySpace's contract.
//  - Not thread-safe, like the backend, except CopyFromPeer's use of `from` (see there). Every
//    call that touches the device makes it current on the calling thread first.
//  - A failing CUDA call is a bug or a dead device and aborts; Allocate returns the allocator's
//    kResourceExhausted.
//  - Destroy it with the device current and both streams idle (Synchronize): the destructor
//    releases the events of tickets never waited for, the copy stream, then the allocator's
//    memory, which nothing may use afterwards.
#ifndef TOWERPS_KERNELS_CUDA_DEVICE_SPACE_H_
#define TOWERPS_KERNELS_CUDA_DEVICE_SPACE_H_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>

#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_handles.h"
#include "towerps/result.h"

namespace towerps::kernels::cuda {

class DeviceSpace {
 public:
  // `copy_stream` is a second stream on `device` (the caller creates it, so that it can come
  // before the library handles and the memory reservation); `allocator` serves `device`.
  DeviceSpace(int device, cudaStream_t compute, CudaStream copy_stream,
              std::unique_ptr<CachingAllocator> allocator);
  DeviceSpace(const DeviceSpace&) = delete;
  DeviceSpace& operator=(const DeviceSpace&) = delete;

  // Thread-safe, as the allocator is; lives as long as this object.
  CachingAllocator& allocator() const { return *allocator_; }

  Result<void*> Allocate(size_t bytes) { return allocator_->Allocate(bytes); }
  void Free(void* p) { allocator_->Free(p); }
  // Waits for the copy: the caller may reuse `host` on return, even when it is pinned.
  void CopyFromHost(const void* host, size_t bytes, void* dst);
  void CopyFromHostAsync(const void* host, size_t bytes, void* dst);
  void CopyToHost(const void* src, size_t bytes, void* host);
  void Copy(const void* src, size_t bytes, void* dst);
  // Both streams: every queued op and copy.
  void Synchronize();
  uint64_t CopyToHostAsync(const void* src, size_t bytes, void* host);
  // Aborts for a ticket this object did not hand out or has already waited for.
  void WaitCopy(uint64_t ticket);
  void PinHostMemory(void* host, size_t bytes);  // cudaHostRegister; best effort
  void UnpinHostMemory(void* host);
  // Copies `bytes` from `src` in `from`'s memory into `dst` in ours, after the work queued on
  // both compute streams so far, on our compute stream. `from` is borrowed and may be in use by
  // another thread: only an event is recorded on its stream (the CUDA runtime is thread-safe),
  // covering the work queued there before the call. The first copy from a device enables peer
  // access to it where the system allows (direct NVLink/P2P); otherwise CUDA stages the copy
  // through host memory. `from` may be this object (then it is Copy).
  void CopyFromPeer(DeviceSpace& from, const void* src, size_t bytes, void* dst);

 private:
  // A CopyToHostAsync in flight: recorded on the compute stream, then on the copy stream.
  struct PendingCopy {
    CudaEvent ready;
    CudaEvent done;
  };

  void Enter() const;

  const int device_;
  const cudaStream_t compute_;
  std::unique_ptr<CachingAllocator> allocator_;  // declared first: destroyed last
  CudaStream copy_stream_;                       // device-to-host copies that overlap compute
  uint64_t next_ticket_ = 1;
  std::map<uint64_t, PendingCopy> copies_;  // by ticket
  std::set<int> peers_tried_;               // devices CopyFromPeer has tried to enable access to
};

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_DEVICE_SPACE_H_
