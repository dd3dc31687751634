// Dense<T>: y[b, :] = x[b, :] * kernel + bias, with kernel [in, out] and bias [out]. The input is
// flattened per example (a [c, h, w] input has in = c * h * w).
#ifndef TOWERPS_WORKER_LAYERS_DENSE_H_
#define TOWERPS_WORKER_LAYERS_DENSE_H_

#include <memory>

#include "towerps/result.h"
#include "worker/layers/initializer.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class Dense final : public Layer<T> {
 public:
  // Parameters "<name>/kernel" (initialized with `init`, seeded) and "<name>/bias" (zeros).
  // kInvalidArgument for units < 1.
  static Result<std::unique_ptr<Dense>> Create(std::string name, const Shape& input_shape,
                                               int units, Init init, uint64_t seed);

  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool training) override;
  void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T* y, const T* dy,
                T* dx) override;
  std::string ops() const override {
    return "Gemm, BiasAdd, Gemm (kernel gradient), BiasBackward, Gemm (input gradient)";
  }
  std::vector<Parameter<T>*> parameters() override { return {&kernel_, &bias_}; }

 private:
  Dense(std::string name, const Shape& input_shape, int units);
  int in_, out_;
  Parameter<T> kernel_, bias_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_DENSE_H_
