// Lrn<T>: local response normalization across channels of [c, h, w] examples, TensorFlow
// semantics (kernels::LrnParams); output shape = input shape.
#ifndef TOWERPS_WORKER_LAYERS_LRN_H_
#define TOWERPS_WORKER_LAYERS_LRN_H_

#include <memory>

#include "towerps/result.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class Lrn final : public Layer<T> {
 public:
  // kInvalidArgument naming the layer for a non-[c, h, w] input or bad parameters.
  static Result<std::unique_ptr<Lrn>> Create(std::string name, const Shape& input_shape,
                                             const kernels::LrnParams& params) {
    if (input_shape.size() != 3) {
      return InvalidArgumentError("lrn layer '" + name + "': input shape " +
                                  ShapeToString(input_shape) + " is not [channels, height, width]");
    }
    if (Status st = params.Validate(); !st.ok()) {
      return st.WithContext("lrn layer '" + name + "'");
    }
    return std::unique_ptr<Lrn>(new Lrn(std::move(name), input_shape, params));
  }

  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool) override {
    backend.LrnForward(batch, channels(), plane(), params_, x, y);
  }
  std::string ops() const override { return "LrnForward, LrnBackward"; }
  void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T*, const T* dy,
                T* dx) override {
    if (dx != nullptr) backend.LrnBackward(batch, channels(), plane(), params_, x, dy, dx);
  }

 private:
  Lrn(std::string name, const Shape& input_shape, const kernels::LrnParams& params)
      : Layer<T>(std::move(name), input_shape, input_shape), params_(params) {}
  int channels() const { return static_cast<int>(this->input_shape()[0]); }
  int plane() const { return static_cast<int>(this->input_shape()[1] * this->input_shape()[2]); }

  kernels::LrnParams params_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_LRN_H_
