// ModelBuilder: a description of a model, a chain of layers and residual blocks, that builds a
// Model<float> for training or a Model<double> for gradient checks, with the same seeded initial
// weights.
//
//   ModelBuilder b({1, 28, 28});
//   b.Conv2d("conv1", 32, 3).Relu().MaxPool(2, 2).Dense("fc1", 128).Relu().Dense("logits", 10);
//   auto model = b.Build<float>(&backend, /*seed=*/1);
//
// A residual block is two branches joined by an add, each described on a builder of its own:
//
//   b.Residual("block1",
//              [](ModelBuilder& m) { m.Conv2d("conv1", 16, 3, 1, Padding::kSame).BatchNorm("bn1")
//                                     .Relu().Conv2d("conv2", 16, 3, 1, Padding::kSame)
//                                     .BatchNorm("bn2"); })   // no shortcut: the identity
//    .Relu();
//
// Its layers' variables are named "<block>/<layer>/...", e.g. "block1/conv1/kernel".
//
// Contract: the builder only records; Build() validates (shapes that do not fit, duplicate
// names, a last layer that is not a Dense) and returns kInvalidArgument naming the layer. Layers
// with parameters need unique names; the others are named "<kind><index>". Value type.
#ifndef TOWERPS_WORKER_MODEL_MODEL_BUILDER_H_
#define TOWERPS_WORKER_MODEL_MODEL_BUILDER_H_

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"
#include "kernels/backend.h"
#include "worker/layers/activation.h"
#include "worker/layers/batch_norm.h"
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
  // Batch normalization; its variables are trainable gamma and beta and the moving mean and
  // variance (worker/layers/batch_norm.h).
  ModelBuilder& BatchNorm(std::string name, BatchNormOptions options = {});
  // [c, h, w] to [c], the mean of each channel.
  ModelBuilder& GlobalAvgPool();
  // Any shape to a vector of its elements.
  ModelBuilder& Flatten();
  // y = main(x) + shortcut(x), each branch described on a fresh builder (whose input shape is
  // ignored: a branch takes the block's input); no shortcut, or one that adds no layers, is the
  // identity. Build checks that the branches end in the same shape.
  using BranchFn = std::function<void(ModelBuilder&)>;
  ModelBuilder& Residual(std::string name, const BranchFn& main, const BranchFn& shortcut = {});

  const Shape& input_shape() const { return input_shape_; }

  template <typename T>
  Result<std::unique_ptr<Model<T>>> Build(kernels::Backend<T>* backend, uint64_t seed) const;

 private:
  enum class Kind {
    kConv2d,
    kDense,
    kActivation,
    kPool,
    kLrn,
    kDropout,
    kBatchNorm,
    kGlobalAvgPool,
    kFlatten,
    kResidual
  };
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
    BatchNormOptions batch_norm;
    std::vector<Spec> main, shortcut;  // kResidual's branches
  };
  // Builds `specs` as a chain from `shape`, naming layers "<prefix><name>"; `index` numbers
  // every layer of the model (unnamed layers and dropout seeds use it).
  template <typename T>
  static Result<std::vector<std::unique_ptr<Layer<T>>>> BuildChain(const std::vector<Spec>& specs,
                                                                   Shape shape,
                                                                   const std::string& prefix,
                                                                   uint64_t seed, int* index,
                                                                   std::set<std::string>* names);
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
