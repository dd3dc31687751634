// BackendBuffer<T>: a move-only owner of `size` elements of T in a backend's memory
// (kernels/memory_space.h), freed through that backend when destroyed or reset.
//
// Contract: the MemorySpace is borrowed and must outlive the buffer. Allocation failures are
// kResourceExhausted from MemorySpace::Allocate. Contents start uninitialised. Not thread-safe.
#ifndef TOWERPS_KERNELS_BACKEND_BUFFER_H_
#define TOWERPS_KERNELS_BACKEND_BUFFER_H_

#include <cstdint>
#include <utility>

#include "kernels/memory_space.h"
#include "towerps/result.h"

namespace towerps::kernels {

template <typename T>
class BackendBuffer {
 public:
  BackendBuffer() = default;
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;
  BackendBuffer(BackendBuffer&& o) noexcept { *this = std::move(o); }
  BackendBuffer& operator=(BackendBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      space_ = std::exchange(o.space_, nullptr);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  ~BackendBuffer() { reset(); }

  static Result<BackendBuffer> Allocate(MemorySpace* space, int64_t size) {
    BackendBuffer b;
    TOWERPS_ASSIGN_OR_RETURN(void* p, space->Allocate(static_cast<size_t>(size) * sizeof(T)));
    b.space_ = space;
    b.data_ = static_cast<T*>(p);
    b.size_ = size;
    return b;
  }

  // Makes the buffer hold at least `size` elements; reallocates (dropping the contents) only
  // when it is too small, so a steady batch size allocates once.
  Status EnsureSize(MemorySpace* space, int64_t size) {
    if (space_ == space && size_ >= size) return Status::Ok();
    reset();
    TOWERPS_ASSIGN_OR_RETURN(*this, Allocate(space, size));
    return Status::Ok();
  }

  void reset() {
    if (space_ != nullptr) space_->Free(data_);
    space_ = nullptr;
    data_ = nullptr;
    size_ = 0;
  }

  T* data() const { return data_; }
  int64_t size() const { return size_; }
  size_t bytes() const { return static_cast<size_t>(size_) * sizeof(T); }

 private:
  MemorySpace* space_ = nullptr;  // borrowed
  T* data_ = nullptr;
  int64_t size_ = 0;
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_BACKEND_BUFFER_H_
