// Dropout<T>: inverted dropout. In training each Forward draws a fresh mask (seeded: the n-th
// training Forward of a layer uses seed (seed, n)); outside training it is the identity.
// Output shape = input shape. Backward uses the mask of the last training Forward.
#ifndef TOWERPS_WORKER_LAYERS_DROPOUT_H_
#define TOWERPS_WORKER_LAYERS_DROPOUT_H_

#include <memory>

#include "kernels/backend_buffer.h"
#include "towerps/result.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class Dropout final : public Layer<T> {
 public:
  // kInvalidArgument for a rate outside [0, 1).
  static Result<std::unique_ptr<Dropout>> Create(std::string name, const Shape& input_shape,
                                                 float rate, uint64_t seed) {
    if (!(rate >= 0.0f && rate < 1.0f)) {
      return InvalidArgumentError("dropout layer '" + name + "': rate " + std::to_string(rate) +
                                  " must be in [0, 1)");
    }
    return std::unique_ptr<Dropout>(new Dropout(std::move(name), input_shape, rate, seed));
  }

  Status Reserve(kernels::Backend<T>& backend, int batch) override {
    return mask_.EnsureSize(&backend, batch * this->input_size());
  }
  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool training) override {
    const int64_t n = batch * this->input_size();
    if (!training) {
      if (x != y) backend.Copy(x, static_cast<size_t>(n) * sizeof(T), y);
      return;
    }
    const Status st = Reserve(backend, batch);  // a no-op when the model reserved already
    TOWERPS_CHECK(st.ok()) << st.ToString();
    backend.DropoutForward(n, rate_, seed_ * 0x9E3779B97F4A7C15ull + step_++, x, mask_.data(), y);
  }
  std::string ops() const override { return "DropoutForward, DropoutBackward"; }
  void SetTrainingStep(uint64_t n) override { step_ = n; }
  void Backward(kernels::Backend<T>& backend, int batch, const T*, const T*, const T* dy,
                T* dx) override {
    if (dx != nullptr) backend.DropoutBackward(batch * this->input_size(), mask_.data(), dy, dx);
  }

 private:
  Dropout(std::string name, const Shape& input_shape, float rate, uint64_t seed)
      : Layer<T>(std::move(name), input_shape, input_shape), rate_(rate), seed_(seed) {}

  float rate_;
  uint64_t seed_;
  uint64_t step_ = 0;
  kernels::BackendBuffer<T> mask_;  // in the backend's memory
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_DROPOUT_H_
