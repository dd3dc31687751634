// Activation<T>: an elementwise nonlinearity (ReLU, tanh or sigmoid); output shape = input shape.
#ifndef TOWERPS_WORKER_LAYERS_ACTIVATION_H_
#define TOWERPS_WORKER_LAYERS_ACTIVATION_H_

#include "towerps/layer_options.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class Activation final : public Layer<T> {
 public:
  Activation(std::string name, const Shape& input_shape, ActivationKind kind)
      : Layer<T>(std::move(name), input_shape, input_shape), kind_(kind) {}

  ActivationKind kind() const { return kind_; }

  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool) override {
    const int64_t n = batch * this->input_size();
    switch (kind_) {
      case ActivationKind::kRelu:
        backend.ReluForward(n, x, y);
        break;
      case ActivationKind::kTanh:
        backend.TanhForward(n, x, y);
        break;
      case ActivationKind::kSigmoid:
        backend.SigmoidForward(n, x, y);
        break;
    }
  }
  std::string ops() const override {
    switch (kind_) {
      case ActivationKind::kRelu:
        return "ReluForward, ReluBackward";
      case ActivationKind::kTanh:
        return "TanhForward, TanhBackward";
      case ActivationKind::kSigmoid:
        return "SigmoidForward, SigmoidBackward";
    }
    return "";
  }
  void Backward(kernels::Backend<T>& backend, int batch, const T*, const T* y, const T* dy,
                T* dx) override {
    if (dx == nullptr) return;
    const int64_t n = batch * this->input_size();
    switch (kind_) {
      case ActivationKind::kRelu:
        backend.ReluBackward(n, y, dy, dx);
        break;
      case ActivationKind::kTanh:
        backend.TanhBackward(n, y, dy, dx);
        break;
      case ActivationKind::kSigmoid:
        backend.SigmoidBackward(n, y, dy, dx);
        break;
    }
  }

 private:
  ActivationKind kind_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_ACTIVATION_H_
