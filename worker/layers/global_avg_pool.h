// GlobalAvgPool<T>: the mean of each channel of a [c, h, w] example, giving [c] (Lin et al.
// 2014; ResNet's last pooling).
#ifndef TOWERPS_WORKER_LAYERS_GLOBAL_AVG_POOL_H_
#define TOWERPS_WORKER_LAYERS_GLOBAL_AVG_POOL_H_

#include <memory>
#include <string>

#include "towerps/result.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class GlobalAvgPool final : public Layer<T> {
 public:
  // kInvalidArgument naming the layer for an input that is not [channels, height, width].
  static Result<std::unique_ptr<GlobalAvgPool>> Create(std::string name, const Shape& input_shape) {
    if (input_shape.size() != 3) {
      return InvalidArgumentError("global average pooling layer '" + name + "': input shape " +
                                  ShapeToString(input_shape) + " is not [channels, height, width]");
    }
    return std::unique_ptr<GlobalAvgPool>(new GlobalAvgPool(std::move(name), input_shape));
  }

  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool) override {
    backend.GlobalAvgPoolForward(batch, channels(), positions(), x, y);
  }
  void Backward(kernels::Backend<T>& backend, int batch, const T*, const T*, const T* dy,
                T* dx) override {
    if (dx != nullptr) backend.GlobalAvgPoolBackward(batch, channels(), positions(), dy, dx);
  }
  std::string ops() const override { return "GlobalAvgPoolForward, GlobalAvgPoolBackward"; }

 private:
  GlobalAvgPool(std::string name, const Shape& input_shape)
      : Layer<T>(std::move(name), input_shape, {input_shape[0]}) {}
  int channels() const { return static_cast<int>(this->input_shape()[0]); }
  int positions() const {
    return static_cast<int>(this->input_shape()[1] * this->input_shape()[2]);
  }
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_GLOBAL_AVG_POOL_H_
