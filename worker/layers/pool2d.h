// Pool2d<T>: max or average pooling over [c, h, w] examples with a square window and stride.
// Padding::kValid drops windows that do not fit; kSame follows TensorFlow ('SAME': ceil(h /
// stride) outputs; padded positions never win a max and are not counted in an average).
#ifndef TOWERPS_WORKER_LAYERS_POOL2D_H_
#define TOWERPS_WORKER_LAYERS_POOL2D_H_

#include <memory>

#include "towerps/result.h"
#include "worker/layers/conv2d.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class Pool2d final : public Layer<T> {
 public:
  // kInvalidArgument naming the layer for a non-[c, h, w] input or an empty output.
  static Result<std::unique_ptr<Pool2d>> Create(std::string name, const Shape& input_shape,
                                                PoolKind kind, int window, int stride,
                                                Padding padding) {
    if (input_shape.size() != 3) {
      return InvalidArgumentError("pooling layer '" + name + "': input shape " +
                                  ShapeToString(input_shape) + " is not [channels, height, width]");
    }
    const int c = static_cast<int>(input_shape[0]), h = static_cast<int>(input_shape[1]),
              w = static_cast<int>(input_shape[2]);
    const kernels::Pool2dShape g = padding == Padding::kSame
                                       ? kernels::Pool2dShape::Same(1, c, h, w, window, stride)
                                       : kernels::Pool2dShape::Valid(1, c, h, w, window, stride);
    if (Status st = g.Validate(); !st.ok()) return st.WithContext("pooling layer '" + name + "'");
    return std::unique_ptr<Pool2d>(new Pool2d(std::move(name), input_shape, kind, g));
  }

  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool) override {
    if (kind_ == PoolKind::kMax) {
      backend.MaxPoolForward(Geometry(batch), x, y);
    } else {
      backend.AvgPoolForward(Geometry(batch), x, y);
    }
  }
  std::string ops() const override {
    return kind_ == PoolKind::kMax ? "MaxPoolForward, MaxPoolBackward"
                                   : "AvgPoolForward, AvgPoolBackward";
  }
  void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T*, const T* dy,
                T* dx) override {
    if (dx == nullptr) return;
    if (kind_ == PoolKind::kMax) {
      backend.MaxPoolBackward(Geometry(batch), x, dy, dx);
    } else {
      backend.AvgPoolBackward(Geometry(batch), dy, dx);
    }
  }

 private:
  Pool2d(std::string name, const Shape& input_shape, PoolKind kind, const kernels::Pool2dShape& g)
      : Layer<T>(std::move(name), input_shape, {g.c, g.out_h, g.out_w}),
        kind_(kind),
        geometry_(g) {}
  kernels::Pool2dShape Geometry(int batch) const {
    kernels::Pool2dShape g = geometry_;
    g.n = batch;
    return g;
  }

  PoolKind kind_;
  kernels::Pool2dShape geometry_;  // with n = 1
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_POOL2D_H_
