// Tensor: a dense host array with a shape and a dtype, stored in 64-byte aligned memory or viewing
// memory someone else owns (a received ZeroMQ message).
//
// Contract:
//  - A Tensor is a reference-counted handle. Copies, View(), Slice() and Reshape() share storage
//    and never copy bytes; Clone() is the only deep copy. The storage lives as long as any handle.
//  - Memory from Tensor::Empty/Zeros is 64-byte aligned and padded to a 64-byte multiple.
//    WrapExternal() memory is as aligned as the caller's pointer; it must be at least aligned to
//    the dtype (checked).
//  - Shapes are row-major; images are NCHW. A rank-0 tensor has one element.
//  - Thread safety: like std::shared_ptr. Handles may be copied across threads; concurrent writes
//    to the same elements are the caller's race.
//  - Misuse (out-of-range views, wrong dtype access) is a programming error: TOWERPS_CHECK.
#ifndef TOWERPS_COMMON_TENSOR_H_
#define TOWERPS_COMMON_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "towerps/check.h"
#include "towerps/result.h"
#include "towerps/shape.h"

namespace towerps {

// Values match proto::DType in common/proto/towerps.capnp.
// kUInt64 carries a table's row ids and kUInt32 its rows' update counts (ps/server/table_chunk.h).
enum class DType : uint8_t { kFloat32 = 0, kUInt8 = 1, kUInt64 = 2, kUInt32 = 3 };

size_t DTypeSize(DType dtype);
const char* DTypeName(DType dtype);

inline constexpr size_t kTensorAlignment = 64;
// This host's memory page: the alignment of buffers a device pins (cudaHostRegister pins whole
// pages, and a page registered for one buffer cannot be registered for another).
size_t HostPageBytes();

class Tensor {
 public:
  Tensor() = default;  // an empty handle: no storage, shape {0}

  // Uninitialised aligned storage: `alignment` (a power of two, at least kTensorAlignment)
  // aligns its start and pads its size.
  static Tensor Empty(Shape shape, DType dtype = DType::kFloat32,
                      size_t alignment = kTensorAlignment);
  static Tensor Zeros(Shape shape, DType dtype = DType::kFloat32);
  // Views `data` without copying. `owner` is kept alive while any handle to the view exists; the
  // memory must stay valid and unmodified by others for that long.
  static Tensor WrapExternal(void* data, Shape shape, DType dtype, std::shared_ptr<void> owner);

  bool defined() const { return base_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t num_elements() const { return NumElements(shape_); }
  size_t byte_size() const { return static_cast<size_t>(num_elements()) * DTypeSize(dtype_); }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t rank() const { return shape_.size(); }

  void* raw_data() const { return base_.get() + offset_bytes_; }
  uint8_t* u8() const {
    TOWERPS_CHECK(dtype_ == DType::kUInt8) << "tensor dtype is " << DTypeName(dtype_);
    return static_cast<uint8_t*>(raw_data());
  }
  uint64_t* u64() const {
    TOWERPS_CHECK(dtype_ == DType::kUInt64) << "tensor dtype is " << DTypeName(dtype_);
    return static_cast<uint64_t*>(raw_data());
  }
  uint32_t* u32() const {
    TOWERPS_CHECK(dtype_ == DType::kUInt32) << "tensor dtype is " << DTypeName(dtype_);
    return static_cast<uint32_t*>(raw_data());
  }
  float* f32() const {
    TOWERPS_CHECK(dtype_ == DType::kFloat32) << "tensor dtype is " << DTypeName(dtype_);
    return static_cast<float*>(raw_data());
  }

  // A view of `shape` starting `element_offset` elements into this tensor's data.
  Tensor View(int64_t element_offset, Shape shape) const;
  // Rows [begin, end) along dimension 0.
  Tensor Slice(int64_t begin, int64_t end) const;
  // Same data, new shape with the same element count.
  Tensor Reshape(Shape shape) const;
  // A deep copy in fresh aligned storage.
  Tensor Clone() const;

  // The shared storage owner; used to keep memory alive during zero-copy sends.
  const std::shared_ptr<std::byte>& storage() const { return base_; }
  bool SharesStorageWith(const Tensor& other) const;
  // Whether this is the only handle to its storage (defined tensors only): then nobody else,
  // no send in flight and no peer reading it through shared memory, can see a write to it.
  // Acquire ordering: writes by the threads that dropped the other handles happen before.
  bool Exclusive() const;

 private:
  Tensor(std::shared_ptr<std::byte> base, size_t base_bytes, size_t offset_bytes, Shape shape,
         DType dtype);

  std::shared_ptr<std::byte> base_;  // start of the storage (or aliasing an external owner)
  size_t base_bytes_ = 0;            // bytes addressable from base_
  size_t offset_bytes_ = 0;          // where this view starts
  Shape shape_ = {0};
  DType dtype_ = DType::kFloat32;
};

// Copy-on-write buffers (ps/server/chunk.h's values, worker/tower_group.h's averages): removes from
// `spares` and returns the first one nobody else holds (Exclusive), or an undefined Tensor when
// every spare is still held.
Tensor TakeExclusive(std::vector<Tensor>& spares);

// Where a component's long-lived buffers come from: e.g. Transport::Allocate, whose tensors go to
// co-located processes through shared memory without a copy. Must be thread-safe. Null: the heap.
using TensorAllocator = std::function<Tensor(const Shape& shape)>;

}  // namespace towerps

#endif  // TOWERPS_COMMON_TENSOR_H_
