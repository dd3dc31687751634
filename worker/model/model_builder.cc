#include "worker/model/model_builder.h"

#include <set>

#include "worker/layers/dense.h"
#include "worker/layers/dropout.h"
#include "worker/layers/flatten.h"
#include "worker/layers/global_avg_pool.h"
#include "worker/layers/lrn.h"
#include "worker/layers/residual.h"

namespace towerps::worker {

ModelBuilder& ModelBuilder::Conv2d(std::string name, int filters, int kernel, int stride,
                                   Padding padding, Init init) {
  Spec& s = Add(Kind::kConv2d);
  s.name = std::move(name);
  s.units = filters;
  s.kernel = kernel;
  s.stride = stride;
  s.padding = padding;
  s.init = init;
  return *this;
}

ModelBuilder& ModelBuilder::Dense(std::string name, int units, Init init) {
  Spec& s = Add(Kind::kDense);
  s.name = std::move(name);
  s.units = units;
  s.init = init;
  return *this;
}

ModelBuilder& ModelBuilder::Activation(ActivationKind kind) {
  Add(Kind::kActivation).act = kind;
  return *this;
}

ModelBuilder& ModelBuilder::MaxPool(int window, int stride, Padding padding) {
  Spec& s = Add(Kind::kPool);
  s.kernel = window;
  s.stride = stride;
  s.padding = padding;
  s.pool = PoolKind::kMax;
  return *this;
}

ModelBuilder& ModelBuilder::AvgPool(int window, int stride, Padding padding) {
  MaxPool(window, stride, padding);
  specs_.back().pool = PoolKind::kAverage;
  return *this;
}

ModelBuilder& ModelBuilder::Lrn(const kernels::LrnParams& params) {
  Add(Kind::kLrn).lrn = params;
  return *this;
}

ModelBuilder& ModelBuilder::Dropout(float rate) {
  Add(Kind::kDropout).rate = rate;
  return *this;
}

ModelBuilder& ModelBuilder::BatchNorm(std::string name, BatchNormOptions options) {
  Spec& s = Add(Kind::kBatchNorm);
  s.name = std::move(name);
  s.batch_norm = options;
  return *this;
}

ModelBuilder& ModelBuilder::GlobalAvgPool() {
  Add(Kind::kGlobalAvgPool);
  return *this;
}

ModelBuilder& ModelBuilder::Flatten() {
  Add(Kind::kFlatten);
  return *this;
}

ModelBuilder& ModelBuilder::Residual(std::string name, const BranchFn& main,
                                     const BranchFn& shortcut) {
  ModelBuilder m(input_shape_), s(input_shape_);
  if (main) main(m);
  if (shortcut) shortcut(s);
  Spec& spec = Add(Kind::kResidual);
  spec.name = std::move(name);
  spec.main = std::move(m.specs_);
  spec.shortcut = std::move(s.specs_);
  return *this;
}

template <typename T>
Result<std::vector<std::unique_ptr<Layer<T>>>> ModelBuilder::BuildChain(
    const std::vector<Spec>& specs, Shape shape, const std::string& prefix, uint64_t seed,
    int* index, std::set<std::string>* names) {
  std::vector<std::unique_ptr<Layer<T>>> layers;
  for (const Spec& s : specs) {
    const int i = (*index)++;
    const std::string name = prefix + (s.name.empty() ? "layer" + std::to_string(i) : s.name);
    if (!names->insert(name).second) {
      return InvalidArgumentError("layer name '" + name + "' is used twice");
    }
    std::unique_ptr<Layer<T>> layer;
    switch (s.kind) {
      case Kind::kConv2d: {
        TOWERPS_ASSIGN_OR_RETURN(
            layer, worker::Conv2d<T>::Create(name, shape, s.units, s.kernel, s.stride, s.padding,
                                             s.init, seed));
        break;
      }
      case Kind::kDense: {
        TOWERPS_ASSIGN_OR_RETURN(layer,
                                 worker::Dense<T>::Create(name, shape, s.units, s.init, seed));
        break;
      }
      case Kind::kActivation:
        layer = std::make_unique<worker::Activation<T>>(name, shape, s.act);
        break;
      case Kind::kPool: {
        TOWERPS_ASSIGN_OR_RETURN(
            layer, Pool2d<T>::Create(name, shape, s.pool, s.kernel, s.stride, s.padding));
        break;
      }
      case Kind::kLrn: {
        TOWERPS_ASSIGN_OR_RETURN(layer, worker::Lrn<T>::Create(name, shape, s.lrn));
        break;
      }
      case Kind::kDropout: {
        TOWERPS_ASSIGN_OR_RETURN(layer, worker::Dropout<T>::Create(name, shape, s.rate, seed + i));
        break;
      }
      case Kind::kBatchNorm: {
        TOWERPS_ASSIGN_OR_RETURN(layer, worker::BatchNorm<T>::Create(name, shape, s.batch_norm));
        break;
      }
      case Kind::kGlobalAvgPool: {
        TOWERPS_ASSIGN_OR_RETURN(layer, worker::GlobalAvgPool<T>::Create(name, shape));
        break;
      }
      case Kind::kFlatten:
        layer = std::make_unique<worker::Flatten<T>>(name, shape);
        break;
      case Kind::kResidual: {
        TOWERPS_ASSIGN_OR_RETURN(auto main,
                                 BuildChain<T>(s.main, shape, name + "/", seed, index, names));
        TOWERPS_ASSIGN_OR_RETURN(auto shortcut,
                                 BuildChain<T>(s.shortcut, shape, name + "/", seed, index, names));
        TOWERPS_ASSIGN_OR_RETURN(
            layer, worker::Residual<T>::Create(name, shape, std::move(main), std::move(shortcut)));
        break;
      }
    }
    shape = layer->output_shape();
    layers.push_back(std::move(layer));
  }
  return layers;
}

template <typename T>
Result<std::unique_ptr<Model<T>>> ModelBuilder::Build(kernels::Backend<T>* backend,
                                                      uint64_t seed) const {
  if (input_shape_.empty() || CheckedNumElements(input_shape_).ok() == false ||
      NumElements(input_shape_) < 1) {
    return InvalidArgumentError("model input shape " + ShapeToString(input_shape_) +
                                " must be non-empty and positive");
  }
  if (specs_.empty() || specs_.back().kind != Kind::kDense) {
    return InvalidArgumentError("a model must end with a Dense layer giving the class logits");
  }
  std::set<std::string> names;
  int index = 0;
  TOWERPS_ASSIGN_OR_RETURN(auto layers,
                           BuildChain<T>(specs_, input_shape_, "", seed, &index, &names));
  return std::make_unique<Model<T>>(input_shape_, std::move(layers), backend);
}

template Result<std::unique_ptr<Model<float>>> ModelBuilder::Build<float>(kernels::Backend<float>*,
                                                                          uint64_t) const;
template Result<std::unique_ptr<Model<double>>> ModelBuilder::Build<double>(
    kernels::Backend<double>*, uint64_t) const;

}  // namespace towerps::worker
