#include "worker/model/model_factory.h"

#include "ps/variable.h"

#include <set>

#include "worker/layers/activation.h"
#include "worker/layers/batch_norm.h"
#include "worker/layers/conv2d.h"
#include "worker/layers/dense.h"
#include "worker/layers/dropout.h"
#include "worker/layers/flatten.h"
#include "worker/layers/global_avg_pool.h"
#include "worker/layers/lrn.h"
#include "worker/layers/pool2d.h"
#include "worker/layers/residual.h"

namespace towerps::worker {

namespace {

// Builds `specs` as a chain from `shape`, naming layers "<prefix><name>"; `index` numbers every
// layer of the model (unnamed layers and dropout seeds use it).
template <typename T>
Result<std::vector<std::unique_ptr<Layer<T>>>> BuildChain(const std::vector<LayerSpec>& specs,
                                                          Shape shape, const std::string& prefix,
                                                          uint64_t seed, int* index,
                                                          std::set<std::string>* names) {
  std::vector<std::unique_ptr<Layer<T>>> layers;
  for (const LayerSpec& s : specs) {
    const int i = (*index)++;
    const std::string name = prefix + (s.name.empty() ? "layer" + std::to_string(i) : s.name);
    if (!names->insert(name).second) {
      return InvalidArgumentError("layer name '" + name + "' is used twice");
    }
    std::unique_ptr<Layer<T>> layer;
    switch (s.kind) {
      case LayerSpec::Kind::kConv2d: {
        TOWERPS_ASSIGN_OR_RETURN(
            layer, worker::Conv2d<T>::Create(name, shape, s.units, s.kernel, s.stride, s.padding,
                                             s.init, seed));
        break;
      }
      case LayerSpec::Kind::kDense: {
        TOWERPS_ASSIGN_OR_RETURN(layer,
                                 worker::Dense<T>::Create(name, shape, s.units, s.init, seed));
        break;
      }
      case LayerSpec::Kind::kActivation:
        layer = std::make_unique<worker::Activation<T>>(name, shape, s.activation);
        break;
      case LayerSpec::Kind::kPool: {
        TOWERPS_ASSIGN_OR_RETURN(
            layer, Pool2d<T>::Create(name, shape, s.pool, s.kernel, s.stride, s.padding));
        break;
      }
      case LayerSpec::Kind::kLrn: {
        TOWERPS_ASSIGN_OR_RETURN(
            layer, worker::Lrn<T>::Create(name, shape,
                                          kernels::LrnParams{.depth_radius = s.lrn.depth_radius,
                                                             .bias = s.lrn.bias,
                                                             .alpha = s.lrn.alpha,
                                                             .beta = s.lrn.beta}));
        break;
      }
      case LayerSpec::Kind::kDropout: {
        TOWERPS_ASSIGN_OR_RETURN(layer, worker::Dropout<T>::Create(name, shape, s.rate, seed + i));
        break;
      }
      case LayerSpec::Kind::kBatchNorm: {
        TOWERPS_ASSIGN_OR_RETURN(layer, worker::BatchNorm<T>::Create(name, shape, s.batch_norm));
        break;
      }
      case LayerSpec::Kind::kGlobalAvgPool: {
        TOWERPS_ASSIGN_OR_RETURN(layer, worker::GlobalAvgPool<T>::Create(name, shape));
        break;
      }
      case LayerSpec::Kind::kFlatten:
        layer = std::make_unique<worker::Flatten<T>>(name, shape);
        break;
      case LayerSpec::Kind::kResidual: {
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

// The tables' part of the first layer's input, per example; kInvalidArgument naming a table
// whose options are out of range or whose name is taken.
Result<int64_t> CheckEmbeddings(const std::vector<EmbeddingSpec>& tables, const Shape& input,
                                std::set<std::string>* names) {
  int64_t width = 0;
  for (const EmbeddingSpec& e : tables) {
    const std::string what = "embedding table '" + e.name + "'";
    if (e.name.empty() || !names->insert(e.name).second) {
      return InvalidArgumentError(what + ": a table needs a name of its own");
    }
    if (e.fields < 1) {
      return InvalidArgumentError(what + ": fields " + std::to_string(e.fields) +
                                  " must be at least 1");
    }
    TOWERPS_RETURN_IF_ERROR(
        ps::ValidateVariableKind(
            ps::TableVariable(e.name, e.options.rows, e.options.dim, e.options.init_scale))
            .WithContext(what));
    width += int64_t{e.fields} * e.options.dim;
  }
  if (!tables.empty() && input.size() != 1) {
    return InvalidArgumentError(
        "a model with embedding tables takes its dense features as a "
        "vector [features], not " +
        ShapeToString(input));
  }
  return width;
}

}  // namespace

template <typename T>
Result<std::unique_ptr<Model<T>>> BuildModel(const ModelBuilder& builder,
                                             kernels::Backend<T>* backend, uint64_t seed) {
  const Shape& input_shape_ = builder.input_shape();
  const std::vector<LayerSpec>& specs_ = builder.layers();
  if (input_shape_.empty() || CheckedNumElements(input_shape_).ok() == false ||
      NumElements(input_shape_) < 1) {
    return InvalidArgumentError("model input shape " + ShapeToString(input_shape_) +
                                " must be non-empty and positive");
  }
  if (specs_.empty() || specs_.back().kind != LayerSpec::Kind::kDense) {
    return InvalidArgumentError("a model must end with a Dense layer giving the class logits");
  }
  if (builder.loss() == LossKind::kSigmoidCrossEntropy && builder.output_units() != 1) {
    return InvalidArgumentError(
        "a model trained with the sigmoid cross-entropy ends in one logit, "
        "but its last Dense layer '" +
        specs_.back().name + "' has " + std::to_string(builder.output_units()) +
        " units (Dense(name, 1), or LossKind::kSoftmaxCrossEntropy)");
  }
  std::set<std::string> names;
  const std::vector<EmbeddingSpec>& tables = builder.embeddings();
  TOWERPS_ASSIGN_OR_RETURN(const int64_t embedded, CheckEmbeddings(tables, input_shape_, &names));
  if (!tables.empty() && !backend->host_memory()) {
    return InvalidArgumentError("embedding table '" + tables[0].name +
                                "': device towers do not run embedding tables yet; use CPU "
                                "towers (--towers cpu:0)");
  }
  const Shape first = tables.empty() ? input_shape_ : Shape{embedded + NumElements(input_shape_)};
  int index = 0;
  TOWERPS_ASSIGN_OR_RETURN(auto layers, BuildChain<T>(specs_, first, "", seed, &index, &names));
  return std::make_unique<Model<T>>(input_shape_, tables, std::move(layers), backend,
                                    builder.loss());
}

template Result<std::unique_ptr<Model<float>>> BuildModel<float>(const ModelBuilder&,
                                                                 kernels::Backend<float>*,
                                                                 uint64_t);
template Result<std::unique_ptr<Model<double>>> BuildModel<double>(const ModelBuilder&,
                                                                   kernels::Backend<double>*,
                                                                   uint64_t);

}  // namespace towerps::worker
