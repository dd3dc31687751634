#include "kernels/cuda/device_space.h"

#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "towerps/check.h"

namespace towerps::kernels::cuda {

DeviceSpace::DeviceSpace(int device, cudaStream_t compute, CudaStream copy_stream,
                         std::unique_ptr<CachingAllocator> allocator)
    : device_(device),
      compute_(compute),
      allocator_(std::move(allocator)),
      copy_stream_(std::move(copy_stream)) {}

void DeviceSpace::Enter() const { TOWERPS_CUDA_CHECK(cudaSetDevice(device_)); }

void DeviceSpace::CopyFromHost(const void* host, size_t bytes, void* dst) {
  if (bytes == 0) return;
  Enter();
  TOWERPS_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, compute_));
  // The caller may reuse `host` when we return; for pinned memory the copy may still be in
  // flight, so wait for it.
  TOWERPS_CUDA_CHECK(cudaStreamSynchronize(compute_));
}

void DeviceSpace::CopyFromHostAsync(const void* host, size_t bytes, void* dst) {
  if (bytes == 0) return;
  Enter();
  TOWERPS_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, compute_));
}

void DeviceSpace::CopyToHost(const void* src, size_t bytes, void* host) {
  if (bytes == 0) return;
  Enter();
  TOWERPS_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, compute_));
  TOWERPS_CUDA_CHECK(cudaStreamSynchronize(compute_));
}

void DeviceSpace::Copy(const void* src, size_t bytes, void* dst) {
  if (bytes == 0) return;
  Enter();
  TOWERPS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_));
}

void DeviceSpace::Synchronize() {
  Enter();
  TOWERPS_CUDA_CHECK(cudaStreamSynchronize(compute_));
  // MemorySpace: every queued op *and copy*, so also the copy stream's CopyToHostAsync copies.
  TOWERPS_CUDA_CHECK(cudaStreamSynchronize(copy_stream_.get()));
}

uint64_t DeviceSpace::CopyToHostAsync(const void* src, size_t bytes, void* host) {
  Enter();
  PendingCopy copy{CudaEvent::Create(cudaEventDisableTiming),
                   CudaEvent::Create(cudaEventDisableTiming)};
  // The copy waits for what the compute stream has queued so far (the producer of src), and
  // the compute stream goes on without waiting for the copy.
  TOWERPS_CUDA_CHECK(cudaEventRecord(copy.ready.get(), compute_));
  TOWERPS_CUDA_CHECK(cudaStreamWaitEvent(copy_stream_.get(), copy.ready.get(), 0));
  if (bytes > 0) {
    TOWERPS_CUDA_CHECK(
        cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, copy_stream_.get()));
  }
  TOWERPS_CUDA_CHECK(cudaEventRecord(copy.done.get(), copy_stream_.get()));
  const uint64_t ticket = next_ticket_++;
  copies_.emplace(ticket, std::move(copy));
  return ticket;
}

void DeviceSpace::WaitCopy(uint64_t ticket) {
  auto it = copies_.find(ticket);
  TOWERPS_CHECK(it != copies_.end()) << "WaitCopy of unknown ticket " << ticket;
  Enter();
  TOWERPS_CUDA_CHECK(cudaEventSynchronize(it->second.done.get()));
  copies_.erase(it);  // releases both events
}

void DeviceSpace::PinHostMemory(void* host, size_t bytes) {
  if (host == nullptr || bytes == 0) return;
  Enter();
  if (cudaHostRegister(host, bytes, cudaHostRegisterDefault) != cudaSuccess) {
    cudaGetLastError();  // not fatal: copies from pageable memory are only slower
  }
}

void DeviceSpace::UnpinHostMemory(void* host) {
  if (host == nullptr) return;
  Enter();
  if (cudaHostUnregister(host) != cudaSuccess) cudaGetLastError();  // it was never pinned
}

void DeviceSpace::CopyFromPeer(DeviceSpace& from, const void* src, size_t bytes, void* dst) {
  if (bytes == 0) return;
  if (&from == this) return Copy(src, bytes, dst);
  // Order after `from`'s queued work (the producer of src) with an event, then copy on ours.
  from.Enter();
  CudaEvent ready = CudaEvent::Create(cudaEventDisableTiming);
  TOWERPS_CUDA_CHECK(cudaEventRecord(ready.get(), from.compute_));
  Enter();
  // Without peer access enabled (from our device to `from`'s) cudaMemcpyPeerAsync is correct but
  // staged through host memory; with it the copy goes directly (NVLink or PCIe P2P). Best
  // effort, once per peer device: where it cannot be enabled the staged copy stays.
  if (from.device_ != device_ && peers_tried_.insert(from.device_).second) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, device_, from.device_) != cudaSuccess || !can ||
        cudaDeviceEnablePeerAccess(from.device_, 0) != cudaSuccess) {
      cudaGetLastError();  // not sticky; e.g. cudaErrorPeerAccessAlreadyEnabled
    }
  }
  TOWERPS_CUDA_CHECK(cudaStreamWaitEvent(compute_, ready.get(), 0));
  TOWERPS_CUDA_CHECK(cudaMemcpyPeerAsync(dst, device_, src, from.device_, bytes, compute_));
  // `ready` goes here: CUDA releases it once the wait has completed.
}

}  // namespace towerps::kernels::cuda
