// Conv2d<T>: 2-D convolution over [c, h, w] examples with kernel [filters, c, k, k] and bias
// [filters]; stride and symmetric zero padding. Padding::kSame pads (k - 1) / 2 on each side,
// which keeps the size for stride 1 and odd k; kValid pads nothing.
#ifndef TOWERPS_WORKER_LAYERS_CONV2D_H_
#define TOWERPS_WORKER_LAYERS_CONV2D_H_

#include <memory>

#include "towerps/layer_options.h"
#include "towerps/result.h"
#include "worker/layers/initializer.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class Conv2d final : public Layer<T> {
 public:
  // kInvalidArgument naming the layer and the value for a non-[c, h, w] input, filters < 1, a
  // kernel larger than the padded input, or stride < 1.
  static Result<std::unique_ptr<Conv2d>> Create(std::string name, const Shape& input_shape,
                                                int filters, int kernel, int stride,
                                                Padding padding, Init init, uint64_t seed);

  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool training) override;
  void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T* y, const T* dy,
                T* dx) override;
  // Reserve() asks the backend how it will run this layer's shape (Backend::Conv2dPlan); ops()
  // names that path from then on, for --log-device-placement.
  Status Reserve(kernels::Backend<T>& backend, int batch) override;
  std::string ops() const override {
    return "Conv2dForward, BiasAdd, Conv2dBackwardFilter, BiasBackward, Conv2dBackwardData" +
           (plan_.empty() ? "" : " [" + plan_ + "]");
  }
  // The backend's path for the last reserved batch ("onednn jit:avx512_core/...", "im2col+sgemm"),
  // empty before Reserve or on a backend with one way only.
  const std::string& plan() const { return plan_; }
  std::vector<Parameter<T>*> parameters() override { return {&kernel_, &bias_}; }

 private:
  Conv2d(std::string name, const Shape& input_shape, const kernels::Conv2dShape& geometry);
  kernels::Conv2dShape Geometry(int batch) const;

  kernels::Conv2dShape geometry_;  // with n = 1
  Parameter<T> kernel_, bias_;
  std::string plan_;
  int planned_batch_ = -1;                           // plan_'s batch size
  const kernels::Backend<T>* planned_on_ = nullptr;  // and backend
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_CONV2D_H_
