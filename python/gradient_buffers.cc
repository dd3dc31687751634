#include "python/gradient_buffers.h"

#include <cstring>

namespace towerps::python {

float* GradientBuffers::Current(bool keep_values) {
  Tensor* current = current_ >= 0 ? &buffers_[static_cast<size_t>(current_)] : nullptr;
  if (current != nullptr && current->Exclusive()) return current->f32();
  // A server still reads the current one (through shared memory, until it lets go): another.
  int next = -1;
  for (size_t b = 0; b < buffers_.size(); ++b) {
    if (buffers_[b].Exclusive()) next = static_cast<int>(b);
  }
  if (next < 0) {
    if (buffers_.size() >= max_buffers_) {
      current_ = -1;  // the caller's own memory now: a push copies it
      return nullptr;
    }
    buffers_.push_back(client_->Allocate(shape_));
    next = static_cast<int>(buffers_.size()) - 1;
    current = current_ >= 0 ? &buffers_[static_cast<size_t>(current_)] : nullptr;
  }
  Tensor& chosen = buffers_[static_cast<size_t>(next)];
  if (keep_values && current != nullptr) {
    std::memcpy(chosen.f32(), current->f32(), chosen.byte_size());
  }
  current_ = next;
  return chosen.f32();
}

const Tensor* GradientBuffers::Lendable(const float* data) const {
  if (current_ < 0) return nullptr;
  const Tensor& buffer = buffers_[static_cast<size_t>(current_)];
  return buffer.f32() == data && buffer.Exclusive() ? &buffer : nullptr;
}

}  // namespace towerps::python
