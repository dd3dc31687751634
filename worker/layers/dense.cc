#include "worker/layers/dense.h"

namespace towerps::worker {

template <typename T>
Dense<T>::Dense(std::string name, const Shape& input_shape, int units)
    : Layer<T>(name, input_shape, {units}),
      in_(static_cast<int>(NumElements(input_shape))),
      out_(units),
      kernel_(name + "/kernel", {NumElements(input_shape), units}),
      bias_(name + "/bias", {units}) {}

template <typename T>
Result<std::unique_ptr<Dense<T>>> Dense<T>::Create(std::string name, const Shape& input_shape,
                                                   int units, Init init, uint64_t seed) {
  if (units < 1) {
    return InvalidArgumentError("dense layer '" + name + "': units " + std::to_string(units) +
                                " must be >= 1");
  }
  std::unique_ptr<Dense> d(new Dense(std::move(name), input_shape, units));
  InitializeValues(init, d->in_, d->out_, seed, d->kernel_.name, d->kernel_.value);
  InitializeValues(Init::kZeros, d->in_, d->out_, seed, d->bias_.name, d->bias_.value);
  return d;
}

template <typename T>
void Dense<T>::Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool) {
  backend.Gemm(false, false, batch, out_, in_, T(1), x, kernel_.backend_value(), T(0), y);
  backend.BiasAdd(batch, out_, 1, bias_.backend_value(), y);
}

template <typename T>
void Dense<T>::Backward(kernels::Backend<T>& backend, int batch, const T* x, const T*, const T* dy,
                        T* dx) {
  // dkernel [in, out] = x^T [in, batch] * dy [batch, out]
  backend.Gemm(true, false, in_, out_, batch, T(1), x, dy, T(0), kernel_.backend_grad());
  backend.BiasBackward(batch, out_, 1, dy, bias_.backend_grad());
  // dx [batch, in] = dy [batch, out] * kernel^T [out, in]
  if (dx != nullptr) {
    backend.Gemm(false, true, batch, in_, out_, T(1), dy, kernel_.backend_value(), T(0), dx);
  }
}

template class Dense<float>;
template class Dense<double>;

}  // namespace towerps::worker
