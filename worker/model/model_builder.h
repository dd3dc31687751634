// ModelBuilder: a small Sequential-style description of a model that builds a Model<float> for
// training or a Model<double> for gradient checks, with the same seeded initial weights.
//
//   ModelBuilder b({1, 28, 28});
//   b.Conv2d("conv1", 32, 3).Relu().MaxPool(2, 2).Dense("fc1", 128).Relu().Dense("logits", 10);
//   auto model = b.Build<float>(&backend, /*seed=*/1);
//
// Contract: the builder only records; Build() validates (shapes that do not fit, duplicate
// names, a last layer that is not a Dense) and returns kInvalidArgument naming the layer. Layers
// with parameters need unique names; the others are named "<kind><index>". Value type.
#ifndef TOWERPS_WORKER_MODEL_MODEL_BUILDER_H_
#define TOWERPS_WORKER_MODEL_MODEL_BUILDER_H_

#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "kernels/backend.h"
#include "worker/layers/activation.h"
#include "worker/layers/conv2d.h"
#include "worker/layers/initializer.h"
#include "worker/layers/pool2d.h"
#include "worker/model/model.h"

namespace towerps::worker {

class ModelBuilder {
 public:
  // Per-example input shape: [c, h, w] for images, [features] for vectors.
  explicit ModelBuilder(Shape input_shape) : input_shape_(std::move(input_shape)) {}

  ModelBuilder& Conv2d(std::string name, int filters, int kernel, int stride = 1,
                       Padding padding = Padding::kValid, Init init = Init::kHe);
  ModelBuilder& Dense(std::string name, int units, Init init = Init::kHe);
  ModelBuilder& Relu() { return Activation(ActivationKind::kRelu); }
  ModelBuilder& Tanh() { return Activation(ActivationKind::kTanh); }
  ModelBuilder& Sigmoid() { return Activation(ActivationKind::kSigmoid); }
  ModelBuilder& Activation(ActivationKind kind);
  ModelBuilder& MaxPool(int window, int stride, Padding padding = Padding::kValid);
  ModelBuilder& AvgPool(int window, int stride, Padding padding = Padding::kValid);
  ModelBuilder& Lrn(const kernels::LrnParams& params);
  ModelBuilder& Dropout(float rate);

  const Shape& input_shape() const { return input_shape_; }

  template <typename T>
  Result<std::unique_ptr<Model<T>>> Build(kernels::Backend<T>* backend, uint64_t seed) const;

 private:
  enum class Kind { kConv2d, kDense, kActivation, kPool, kLrn, kDropout };
  struct Spec {
    Kind kind = Kind::kDense;
    std::string name;
    int units = 0;  // filters for conv
    int kernel = 0, stride = 1;
    Padding padding = Padding::kValid;
    Init init = Init::kHe;
    ActivationKind act = ActivationKind::kRelu;
    PoolKind pool = PoolKind::kMax;
    kernels::LrnParams lrn;
    float rate = 0;
  };
  // Appends a spec of `kind` and returns it for the caller to fill in.
  Spec& Add(Kind kind) {
    specs_.emplace_back();
    specs_.back().kind = kind;
    return specs_.back();
  }

  Shape input_shape_;
  std::vector<Spec> specs_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_MODEL_MODEL_BUILDER_H_
