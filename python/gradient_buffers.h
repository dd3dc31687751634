// GradientBuffers: one parameter's gradient buffers in the client's memory (the shared-memory
// arena's when a server is on this host), which a PyTorch script accumulates its p.grad into and
// a push lends to the servers without a copy (python/session.h).
//
// A lent buffer is the servers' to read until they let go of it (Tensor::Exclusive()), so the
// script gets another one meanwhile: at most `max_buffers`, after which it must use memory of
// its own, which a push copies.
//
// Contract: used by the session's training thread only. Borrows the client, which must outlive
// it; every buffer lives as long as the GradientBuffers.
#ifndef TOWERPS_PYTHON_GRADIENT_BUFFERS_H_
#define TOWERPS_PYTHON_GRADIENT_BUFFERS_H_

#include <cstddef>
#include <vector>

#include "common/tensor.h"
#include "ps/client/client.h"

namespace towerps::python {

class GradientBuffers {
 public:
  GradientBuffers(ps::Client* client, Shape shape, size_t max_buffers)
      : client_(client), shape_(std::move(shape)), max_buffers_(max_buffers) {}

  // A buffer no server reads: the current one when that is so, else another, which becomes
  // current, with the values of the one before when `keep_values`. nullptr when all
  // `max_buffers` are lent: there is no current buffer then.
  float* Current(bool keep_values);
  // The current buffer, when `data` is its memory and no server reads it: what a push may lend
  // as it is. Null otherwise (the push copies `data`).
  const Tensor* Lendable(const float* data) const;

 private:
  ps::Client* client_;
  Shape shape_;
  size_t max_buffers_;
  std::vector<Tensor> buffers_;
  int current_ = -1;  // -1: none
};

}  // namespace towerps::python

#endif  // TOWERPS_PYTHON_GRADIENT_BUFFERS_H_
