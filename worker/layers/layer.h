// Layer<T>: one step of a feed-forward model, with forward, backward and named parameters.
// Instantiated for float (training) and double (finite-difference gradient checks).
//
// Contract:
//  - A layer knows its per-example input and output shapes (without the batch dimension) from
//    construction. Buffers hold `batch` examples back to back, in the backend's memory.
//  - Buffers and parameters passed to the backend are in the backend's memory
//    (Parameter::backend_value). Reserve() allocates a layer's own backend buffers for a batch
//    size, so running out of device memory is a Status; the Model calls it before Forward.
//  - Forward writes y. Backward, given the x and y of the last Forward and dy, overwrites every
//    parameter gradient and, when dx is not null, writes dx. Gradients are for the summed loss
//    that dy came from; nothing is averaged here.
//  - Parameters are owned by the layer; pointers from parameters() stay valid for its lifetime.
//  - Not thread-safe; one model (and so one layer) per training thread.
#ifndef TOWERPS_WORKER_LAYERS_LAYER_H_
#define TOWERPS_WORKER_LAYERS_LAYER_H_

#include <string>
#include <vector>

#include "common/tensor.h"
#include "job/variable.h"
#include "kernels/backend.h"
#include "towerps/status.h"

namespace towerps::worker {

// A named parameter. `value` and `grad` are the host copies: what is pushed and pulled, and
// what tests inspect. Layers hand the backend backend_value()/backend_grad(): the host vectors
// themselves on host-memory backends, or device mirrors that the Model owns and keeps in step
// with the host copies (worker/model/model.h) when the backend's memory is not host memory.
//
// A parameter of kind kMovingAverage (job/variable.h; batch norm's moving statistics) is not
// trained: a training Backward writes the batch's statistic into `grad`, and whoever applies
// updates moves `value` toward it with `decay`.
template <typename T>
struct Parameter {
  std::string name;  // unique in the model, "conv1/kernel"
  Shape shape;
  std::vector<T> value;
  std::vector<T> grad;  // same size as value
  ps::VariableKind kind = ps::VariableKind::kTrainable;
  float decay = 0.0f;  // kMovingAverage only
  // Device mirrors, borrowed from the Model; null on host-memory backends.
  T* device_value = nullptr;
  T* device_grad = nullptr;

  T* backend_value() { return device_value != nullptr ? device_value : value.data(); }
  T* backend_grad() { return device_grad != nullptr ? device_grad : grad.data(); }

  Parameter(std::string n, Shape s)
      : name(std::move(n)),
        shape(std::move(s)),
        value(NumElements(shape)),
        grad(NumElements(shape)) {}
};

template <typename T>
class Layer {
 public:
  Layer(std::string name, Shape input_shape, Shape output_shape)
      : name_(std::move(name)),
        input_shape_(std::move(input_shape)),
        output_shape_(std::move(output_shape)) {}
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return input_shape_; }    // per example
  const Shape& output_shape() const { return output_shape_; }  // per example
  int64_t input_size() const { return NumElements(input_shape_); }
  int64_t output_size() const { return NumElements(output_shape_); }

  // Allocates whatever backend memory the layer keeps between Forward and Backward for `batch`
  // examples (e.g. the dropout mask); kResourceExhausted when the backend has none left.
  virtual Status Reserve(kernels::Backend<T>& /*backend*/, int /*batch*/) { return Status::Ok(); }
  // `training` enables dropout.
  virtual void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y,
                       bool training) = 0;
  virtual void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T* y,
                        const T* dy, T* dx) = 0;
  // The backend ops Forward and Backward call, for --log-device-placement.
  virtual std::string ops() const = 0;
  // The next training Forward is the n-th (0-based) of this layer: a layer with random state
  // (dropout) draws what it would have drawn then, so that a restarted worker recomputing step n
  // reproduces its predecessor's step bit for bit. A no-op for deterministic layers.
  virtual void SetTrainingStep(uint64_t /*n*/) {}
  // In a stable order (kernel before bias). Empty for layers without parameters.
  virtual std::vector<Parameter<T>*> parameters() { return {}; }
  // The layers a residual block runs, in order (main branch, then shortcut), for per-layer
  // profiles (`towerps-bench train --profile`); empty for every other layer.
  virtual std::vector<Layer<T>*> sublayers() { return {}; }

 private:
  std::string name_;
  Shape input_shape_;
  Shape output_shape_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_LAYER_H_
