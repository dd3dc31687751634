// DeviceBuffer: a move-only owner of one block of a CachingAllocator's memory that grows on
// demand: the CUDA backend's workspaces and scratch. Internal to kernels/cuda.
//
// Contract:
//  - The allocator is borrowed and must outlive the buffer; the destructor returns the block to it.
//  - Grow() drops the contents. The old block is freed before the new one is taken, which is
//    safe only when every use of the buffer is queued on one stream (the allocator is not
//    stream-aware; see caching_allocator.h): the queued users of the old block run first.
//  - Errors: Grow() returns the allocator's kResourceExhausted when it cannot grow; the buffer
//    then keeps its old size (callers may rely on it).
//  - Not thread-safe.
#ifndef TOWERPS_KERNELS_CUDA_DEVICE_BUFFER_H_
#define TOWERPS_KERNELS_CUDA_DEVICE_BUFFER_H_

#include <cstddef>
#include <utility>

#include "kernels/cuda/caching_allocator.h"
#include "towerps/check.h"
#include "towerps/result.h"

namespace towerps::kernels::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;  // empty, and cannot grow
  explicit DeviceBuffer(CachingAllocator* allocator) : allocator_(allocator) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : allocator_(std::exchange(other.allocator_, nullptr)),
        data_(std::exchange(other.data_, nullptr)),
        bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      allocator_ = std::exchange(other.allocator_, nullptr);
      data_ = std::exchange(other.data_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Release(); }

  // Grows the buffer to at least `bytes`; a no-op when it is that large already.
  Status Grow(size_t bytes) {
    if (bytes_ >= bytes) return Status::Ok();
    TOWERPS_CHECK(allocator_ != nullptr) << "DeviceBuffer without an allocator";
    allocator_->Free(data_);
    Result<void*> p = allocator_->Allocate(bytes);
    if (p.ok()) {
      data_ = *p;
      bytes_ = bytes;
      return Status::Ok();
    }
    // The block just freed is free again, so the old size always fits.
    Result<void*> old = allocator_->Allocate(bytes_);
    TOWERPS_CHECK(old.ok()) << old.status().ToString();
    data_ = *old;
    return p.status();
  }

  // Device memory of size() bytes (null while empty); borrowed, valid until the next Grow.
  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void Release() {
    if (allocator_ != nullptr) allocator_->Free(data_);
    data_ = nullptr;
    bytes_ = 0;
  }

  CachingAllocator* allocator_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_DEVICE_BUFFER_H_
