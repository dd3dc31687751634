// BatchNorm<T>: batch normalization (Ioffe and Szegedy 2015) per channel of [c, h, w] examples,
// with statistics over the batch and the positions, or per feature of [features] examples.
//
// Variables, in this order:
//  - "<name>/gamma" (ones) and "<name>/beta" (zeros): trainable, y = gamma * xhat + beta;
//  - "<name>/moving_mean" (zeros) and "<name>/moving_variance" (ones): ps::VariableKind::
//    kMovingAverage with decay `momentum`. They are not trained. Each training Backward writes
//    the batch's mean and unbiased variance into their gradient slots, and whoever applies
//    updates (the parameter server, or MomentumSgd locally) moves them:
//    v = momentum * v + (1 - momentum) * statistic.
// A training Forward normalizes with the batch's own statistics; an inference Forward (the
// model's Evaluate) with the moving ones.
//
// Contract: as Layer<T>. Backward uses the statistics of the last training Forward.
#ifndef TOWERPS_WORKER_LAYERS_BATCH_NORM_H_
#define TOWERPS_WORKER_LAYERS_BATCH_NORM_H_

#include <memory>
#include <string>

#include "kernels/backend_buffer.h"
#include "towerps/layer_options.h"
#include "towerps/result.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class BatchNorm final : public Layer<T> {
 public:
  // kInvalidArgument naming the layer and the value for an input that is not [c, h, w] or
  // [features], a momentum outside [0, 1) or an epsilon that is not positive.
  static Result<std::unique_ptr<BatchNorm>> Create(std::string name, const Shape& input_shape,
                                                   const BatchNormOptions& options);

  Status Reserve(kernels::Backend<T>& backend, int batch) override;
  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool training) override;
  void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T* y, const T* dy,
                T* dx) override;
  std::string ops() const override {
    return "BatchNormForwardTraining, BatchNormForwardInference, BatchNormBackward";
  }
  std::vector<Parameter<T>*> parameters() override {
    return {&gamma_, &beta_, &moving_mean_, &moving_variance_};
  }

 private:
  BatchNorm(std::string name, const Shape& input_shape, const BatchNormOptions& options);
  int channels() const { return static_cast<int>(this->input_shape()[0]); }
  int positions() const { return static_cast<int>(this->input_size() / channels()); }

  BatchNormOptions options_;
  Parameter<T> gamma_, beta_, moving_mean_, moving_variance_;
  kernels::BackendBuffer<T> inv_std_;     // [c], of the last training Forward
  kernels::BackendBuffer<T> dx_scratch_;  // when the model asks for no dx
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_BATCH_NORM_H_
