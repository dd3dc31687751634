#include "common/tensor.h"

#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <utility>

namespace towerps {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 4;
    case DType::kUInt8:
      return 1;
    case DType::kUInt64:
      return 8;
    case DType::kUInt32:
      return 4;
  }
  TOWERPS_CHECK(false) << "unknown dtype " << static_cast<int>(dtype);
  return 0;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kUInt8:
      return "uint8";
    case DType::kUInt64:
      return "uint64";
    case DType::kUInt32:
      return "uint32";
  }
  return "unknown";
}

Result<int64_t> CheckedNumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgumentError("negative dimension in shape " + ShapeToString(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) {
      return InvalidArgumentError("shape " + ShapeToString(shape) + " overflows int64");
    }
    n *= d;
  }
  return n;
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(const Shape& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

Tensor::Tensor(std::shared_ptr<std::byte> base, size_t base_bytes, size_t offset_bytes, Shape shape,
               DType dtype)
    : base_(std::move(base)),
      base_bytes_(base_bytes),
      offset_bytes_(offset_bytes),
      shape_(std::move(shape)),
      dtype_(dtype) {}

size_t HostPageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

Tensor Tensor::Empty(Shape shape, DType dtype, size_t alignment) {
  Result<int64_t> n = CheckedNumElements(shape);
  TOWERPS_CHECK(n.ok()) << n.status().ToString();
  TOWERPS_CHECK(alignment >= kTensorAlignment && (alignment & (alignment - 1)) == 0)
      << "alignment " << alignment;
  const size_t bytes = static_cast<size_t>(*n) * DTypeSize(dtype);
  // Round up so that vector loops may touch whole cache lines, and never allocate zero bytes.
  const size_t padded = (bytes + alignment - 1) / alignment * alignment;
  // A malloc'd block, its start rounded up to `alignment`: glibc's aligned_alloc carves every
  // block out of a larger one and frees the two ends, past its thread cache and under the arena's
  // lock, which cost 5x a malloc and free for a step's few-KiB tensors (docs/PERFORMANCE.md,
  // "The script's allocator, and tensors from malloc"). The price is at most `alignment` - 16
  // bytes a tensor.
  const size_t slack = alignment - alignof(std::max_align_t);  // alignment >= 64, checked above
  void* raw = std::malloc((padded == 0 ? alignment : padded) + slack);
  if (raw == nullptr) throw std::bad_alloc();
  auto* p = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(raw) + alignment - 1) &
                                         ~static_cast<uintptr_t>(alignment - 1));
  std::shared_ptr<std::byte> base(p, [raw](std::byte*) { std::free(raw); });
  return Tensor(std::move(base), bytes, 0, std::move(shape), dtype);
}

Tensor Tensor::Zeros(Shape shape, DType dtype) {
  Tensor t = Empty(std::move(shape), dtype);
  std::memset(t.raw_data(), 0, t.byte_size());
  return t;
}

Tensor Tensor::WrapExternal(void* data, Shape shape, DType dtype, std::shared_ptr<void> owner) {
  TOWERPS_CHECK(reinterpret_cast<uintptr_t>(data) % DTypeSize(dtype) == 0)
      << "external data is not aligned to its dtype";
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * DTypeSize(dtype);
  // Aliasing constructor: shares ownership with `owner`, points at `data`.
  std::shared_ptr<std::byte> base(std::move(owner), static_cast<std::byte*>(data));
  return Tensor(std::move(base), bytes, 0, std::move(shape), dtype);
}

Tensor Tensor::View(int64_t element_offset, Shape shape) const {
  const size_t esize = DTypeSize(dtype_);
  TOWERPS_CHECK(element_offset >= 0);
  const size_t begin = offset_bytes_ + static_cast<size_t>(element_offset) * esize;
  const size_t bytes = static_cast<size_t>(NumElements(shape)) * esize;
  TOWERPS_CHECK(begin + bytes <= base_bytes_)
      << "view of " << ShapeToString(shape) << " at element " << element_offset
      << " exceeds storage of " << base_bytes_ << " bytes";
  return Tensor(base_, base_bytes_, begin, std::move(shape), dtype_);
}

Tensor Tensor::Slice(int64_t begin, int64_t end) const {
  TOWERPS_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0])
      << "slice [" << begin << ", " << end << ") of " << ShapeToString(shape_);
  Shape s = shape_;
  s[0] = end - begin;
  const int64_t row = shape_[0] == 0 ? 0 : num_elements() / shape_[0];
  return View(begin * row, std::move(s));
}

Tensor Tensor::Reshape(Shape shape) const {
  TOWERPS_CHECK_EQ(NumElements(shape), num_elements());
  return Tensor(base_, base_bytes_, offset_bytes_, std::move(shape), dtype_);
}

Tensor Tensor::Clone() const {
  Tensor copy = Empty(shape_, dtype_);
  if (byte_size() > 0) std::memcpy(copy.raw_data(), raw_data(), byte_size());
  return copy;
}

bool Tensor::Exclusive() const {
  if (base_.use_count() != 1) return false;
  std::atomic_thread_fence(std::memory_order_acquire);
  return true;
}

Tensor TakeExclusive(std::vector<Tensor>& spares) {
  for (auto it = spares.begin(); it != spares.end(); ++it) {
    if (it->Exclusive()) {
      Tensor t = std::move(*it);
      spares.erase(it);
      return t;
    }
  }
  return Tensor();
}

bool Tensor::SharesStorageWith(const Tensor& other) const {
  return base_ != nullptr && !base_.owner_before(other.base_) && !other.base_.owner_before(base_);
}

}  // namespace towerps
