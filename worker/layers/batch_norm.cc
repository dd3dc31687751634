#include "worker/layers/batch_norm.h"

#include <algorithm>

#include "towerps/check.h"

namespace towerps::worker {

template <typename T>
Result<std::unique_ptr<BatchNorm<T>>> BatchNorm<T>::Create(std::string name,
                                                           const Shape& input_shape,
                                                           const BatchNormOptions& options) {
  const std::string what = "batch norm layer '" + name + "'";
  if (input_shape.size() != 3 && input_shape.size() != 1) {
    return InvalidArgumentError(what + ": input shape " + ShapeToString(input_shape) +
                                " is neither [channels, height, width] nor [features]");
  }
  if (!(options.momentum >= 0.0f && options.momentum < 1.0f)) {
    return InvalidArgumentError(what + ": momentum " + std::to_string(options.momentum) +
                                " must be in [0, 1)");
  }
  if (!(options.epsilon > 0.0f)) {
    return InvalidArgumentError(what + ": epsilon " + std::to_string(options.epsilon) +
                                " must be positive");
  }
  return std::unique_ptr<BatchNorm>(new BatchNorm(std::move(name), input_shape, options));
}

template <typename T>
BatchNorm<T>::BatchNorm(std::string name, const Shape& input_shape, const BatchNormOptions& options)
    : Layer<T>(name, input_shape, input_shape),
      options_(options),
      gamma_(name + "/gamma", {input_shape[0]}),
      beta_(name + "/beta", {input_shape[0]}),
      moving_mean_(name + "/moving_mean", {input_shape[0]}),
      moving_variance_(name + "/moving_variance", {input_shape[0]}) {
  std::fill(gamma_.value.begin(), gamma_.value.end(), T{1});
  std::fill(moving_variance_.value.begin(), moving_variance_.value.end(), T{1});
  for (Parameter<T>* p : {&moving_mean_, &moving_variance_}) {
    p->kind = ps::VariableKind::kMovingAverage;
    p->decay = options.momentum;
  }
}

template <typename T>
Status BatchNorm<T>::Reserve(kernels::Backend<T>& backend, int) {
  return inv_std_.EnsureSize(&backend, channels());
}

template <typename T>
void BatchNorm<T>::Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y,
                           bool training) {
  const T eps = static_cast<T>(options_.epsilon);
  if (!training) {
    backend.BatchNormForwardInference(
        batch, channels(), positions(), eps, x, gamma_.backend_value(), beta_.backend_value(),
        moving_mean_.backend_value(), moving_variance_.backend_value(), y);
    return;
  }
  const Status st = Reserve(backend, batch);  // a no-op when the model reserved already
  TOWERPS_CHECK(st.ok()) << st.ToString();
  // The batch's mean and (biased) variance go straight into the moving statistics' gradient
  // slots; Backward makes the variance unbiased.
  backend.BatchNormForwardTraining(batch, channels(), positions(), eps, x, gamma_.backend_value(),
                                   beta_.backend_value(), y, moving_mean_.backend_grad(),
                                   moving_variance_.backend_grad(), inv_std_.data());
}

template <typename T>
void BatchNorm<T>::Backward(kernels::Backend<T>& backend, int batch, const T* x, const T*,
                            const T* dy, T* dx) {
  if (dx == nullptr) {
    const Status st = dx_scratch_.EnsureSize(&backend, batch * this->input_size());
    TOWERPS_CHECK(st.ok()) << this->name() << ": " << st.ToString();
    dx = dx_scratch_.data();
  }
  backend.BatchNormBackward(batch, channels(), positions(), x, dy, gamma_.backend_value(),
                            moving_mean_.backend_grad(), inv_std_.data(), dx, gamma_.backend_grad(),
                            beta_.backend_grad());
  // The statistic for the moving variance is the unbiased one, as PyTorch keeps.
  const int64_t m = int64_t{batch} * positions();
  if (m > 1) {
    backend.Scale(channels(), static_cast<T>(static_cast<double>(m) / static_cast<double>(m - 1)),
                  moving_variance_.backend_grad());
  }
}

template class BatchNorm<float>;
template class BatchNorm<double>;

}  // namespace towerps::worker
