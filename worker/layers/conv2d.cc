#include "worker/layers/conv2d.h"

namespace towerps::worker {

template <typename T>
Conv2d<T>::Conv2d(std::string name, const Shape& input_shape, const kernels::Conv2dShape& g)
    : Layer<T>(name, input_shape, {g.k, g.out_h(), g.out_w()}),
      geometry_(g),
      kernel_(name + "/kernel", {g.k, g.c, g.r, g.s}),
      bias_(name + "/bias", {g.k}) {}

template <typename T>
Result<std::unique_ptr<Conv2d<T>>> Conv2d<T>::Create(std::string name, const Shape& input_shape,
                                                     int filters, int kernel, int stride,
                                                     Padding padding, Init init, uint64_t seed) {
  if (input_shape.size() != 3) {
    return InvalidArgumentError("conv2d layer '" + name + "': input shape " +
                                ShapeToString(input_shape) + " is not [channels, height, width]");
  }
  const int pad = padding == Padding::kSame ? (kernel - 1) / 2 : 0;
  kernels::Conv2dShape g{.n = 1,
                         .c = static_cast<int>(input_shape[0]),
                         .h = static_cast<int>(input_shape[1]),
                         .w = static_cast<int>(input_shape[2]),
                         .k = filters,
                         .r = kernel,
                         .s = kernel,
                         .stride_h = stride,
                         .stride_w = stride,
                         .pad_h = pad,
                         .pad_w = pad};
  if (Status st = g.Validate(); !st.ok()) return st.WithContext("conv2d layer '" + name + "'");
  std::unique_ptr<Conv2d> c(new Conv2d(std::move(name), input_shape, g));
  const int64_t fan_in = int64_t{g.c} * g.r * g.s, fan_out = int64_t{g.k} * g.r * g.s;
  InitializeValues(init, fan_in, fan_out, seed, c->kernel_.name, c->kernel_.value);
  InitializeValues(Init::kZeros, fan_in, fan_out, seed, c->bias_.name, c->bias_.value);
  return c;
}

template <typename T>
kernels::Conv2dShape Conv2d<T>::Geometry(int batch) const {
  kernels::Conv2dShape g = geometry_;
  g.n = batch;
  return g;
}

template <typename T>
Status Conv2d<T>::Reserve(kernels::Backend<T>& backend, int batch) {
  // Once per batch size: a residual block reserves its layers on every Forward.
  if (batch == planned_batch_ && &backend == planned_on_) return Status::Ok();
  plan_ = backend.Conv2dPlan(Geometry(batch));
  planned_batch_ = batch;
  planned_on_ = &backend;
  return Status::Ok();
}

template <typename T>
void Conv2d<T>::Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool) {
  const kernels::Conv2dShape g = Geometry(batch);
  backend.Conv2dForward(g, x, kernel_.backend_value(), y);
  backend.BiasAdd(batch, g.k, g.out_h() * g.out_w(), bias_.backend_value(), y);
}

template <typename T>
void Conv2d<T>::Backward(kernels::Backend<T>& backend, int batch, const T* x, const T*, const T* dy,
                         T* dx) {
  const kernels::Conv2dShape g = Geometry(batch);
  backend.Conv2dBackwardFilter(g, x, dy, kernel_.backend_grad());
  backend.BiasBackward(batch, g.k, g.out_h() * g.out_w(), dy, bias_.backend_grad());
  if (dx != nullptr) backend.Conv2dBackwardData(g, dy, kernel_.backend_value(), dx);
}

template class Conv2d<float>;
template class Conv2d<double>;

}  // namespace towerps::worker
