// Flatten<T>: an example of any shape, e.g. [c, h, w], as the vector [c * h * w]. The values
// keep their order (NCHW is already row-major), so Forward and Backward are copies.
#ifndef TOWERPS_WORKER_LAYERS_FLATTEN_H_
#define TOWERPS_WORKER_LAYERS_FLATTEN_H_

#include <string>

#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class Flatten final : public Layer<T> {
 public:
  Flatten(std::string name, const Shape& input_shape)
      : Layer<T>(std::move(name), input_shape, {NumElements(input_shape)}) {}

  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool) override {
    if (x != y) backend.Copy(x, Bytes(batch), y);
  }
  void Backward(kernels::Backend<T>& backend, int batch, const T*, const T*, const T* dy,
                T* dx) override {
    if (dx != nullptr && dx != dy) backend.Copy(dy, Bytes(batch), dx);
  }
  std::string ops() const override { return "Copy"; }

 private:
  size_t Bytes(int batch) const {
    return static_cast<size_t>(batch * this->input_size()) * sizeof(T);
  }
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_FLATTEN_H_
