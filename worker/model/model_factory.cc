#include "worker/model/model_factory.h"

#include "job/variable.h"

#include <algorithm>
#include <set>

#include "worker/layers/activation.h"
#include "worker/layers/batch_norm.h"
#include "worker/layers/conv2d.h"
#include "worker/layers/dense.h"
#include "worker/layers/dropout.h"
#include "worker/layers/flatten.h"
#include "worker/layers/global_avg_pool.h"
#include "worker/layers/join.h"
#include "worker/layers/lrn.h"
#include "worker/layers/pool2d.h"
#include "worker/layers/residual.h"

namespace towerps::worker {

namespace {

// The model's inputs as its first layer sees them: each embedding table's rows and the dense
// features, by name, as columns of the example's row, and the dense features' own shape.
struct ModelInputs {
  std::vector<std::pair<std::string, Join<float>::Columns>> columns{};  // in row order
  Shape dense_shape;
};

// "branch 2 (C1, C2, C3, ...)": a branch of a Join, for messages.
std::string BranchName(size_t index, const std::vector<std::string>& inputs) {
  std::string names;
  for (size_t i = 0; i < inputs.size() && i < 3; ++i) names += (i ? ", " : "") + inputs[i];
  if (inputs.size() > 3) names += ", ...";
  return "branch " + std::to_string(index + 1) + (inputs.empty() ? "" : " (" + names + ")");
}

template <typename T>
Result<std::vector<std::unique_ptr<Layer<T>>>> BuildChain(const std::vector<LayerSpec>& specs,
                                                          Shape shape, const std::string& prefix,
                                                          uint64_t seed, int* index,
                                                          std::set<std::string>* names,
                                                          const ModelInputs* inputs = nullptr);

// A Join block: each branch's columns of the block's input (named model inputs, allowed only
// when `inputs` is given: the model's first layer) and its chain.
template <typename T>
Result<std::unique_ptr<Layer<T>>> BuildJoin(const LayerSpec& s, const std::string& name,
                                            const Shape& shape, uint64_t seed, int* index,
                                            std::set<std::string>* names,
                                            const ModelInputs* inputs) {
  std::vector<typename Join<T>::BranchParts> parts;
  for (size_t i = 0; i < s.branches.size(); ++i) {
    const BranchSpec& branch = s.branches[i];
    typename Join<T>::BranchParts p;
    p.name = BranchName(i, branch.inputs);
    p.input_shape = shape;
    if (!branch.inputs.empty() && inputs == nullptr) {
      return InvalidArgumentError("join block '" + name + "': " + p.name +
                                  " takes model inputs by name, which only the model's first "
                                  "layer sees; give it none (the block's whole input)");
    }
    std::set<std::string> taken;
    for (const std::string& input : branch.inputs) {
      const auto it = std::find_if(inputs->columns.begin(), inputs->columns.end(),
                                   [&](const auto& c) { return c.first == input; });
      if (it == inputs->columns.end()) {
        std::string known;
        for (const auto& c : inputs->columns) known += (known.empty() ? "" : ", ") + c.first;
        return InvalidArgumentError("join block '" + name + "': " + p.name + " takes '" + input +
                                    "', which is not an input of the model (its inputs: " + known +
                                    ")");
      }
      if (!taken.insert(input).second) {
        return InvalidArgumentError("join block '" + name + "': " + p.name + " takes '" + input +
                                    "' twice");
      }
      p.inputs.push_back({it->second.offset, it->second.width});
    }
    if (branch.inputs.size() == 1 && branch.inputs[0] == "dense") {
      p.input_shape = inputs->dense_shape;  // images stay images
    } else if (!branch.inputs.empty()) {
      int64_t width = 0;
      for (const auto& c : p.inputs) width += c.width;
      p.input_shape = {width};
    }
    TOWERPS_ASSIGN_OR_RETURN(
        p.layers, BuildChain<T>(branch.layers, p.input_shape, name + "/", seed, index, names));
    parts.push_back(std::move(p));
  }
  TOWERPS_ASSIGN_OR_RETURN(auto join, Join<T>::Create(name, shape, s.join, std::move(parts)));
  return std::unique_ptr<Layer<T>>(std::move(join));
}

// Builds `specs` as a chain from `shape`, naming layers "<prefix><name>"; `index` numbers every
// layer of the model (unnamed layers and dropout seeds use it).
// `inputs`: the model's inputs by name, for a Join that is the chain's first layer.
template <typename T>
Result<std::vector<std::unique_ptr<Layer<T>>>> BuildChain(const std::vector<LayerSpec>& specs,
                                                          Shape shape, const std::string& prefix,
                                                          uint64_t seed, int* index,
                                                          std::set<std::string>* names,
                                                          const ModelInputs* inputs) {
  std::vector<std::unique_ptr<Layer<T>>> layers;
  for (const LayerSpec& s : specs) {
    const ModelInputs* first_inputs = layers.empty() ? inputs : nullptr;
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
      case LayerSpec::Kind::kJoin: {
        TOWERPS_ASSIGN_OR_RETURN(layer,
                                 BuildJoin<T>(s, name, shape, seed, index, names, first_inputs));
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
    if (e.name == "dense") {
      return InvalidArgumentError(what +
                                  ": 'dense' names the model's dense features (a Join's "
                                  "branches take inputs by name); call the table otherwise");
    }
    if (!e.ids_of.empty()) {
      const auto before = tables.begin() + (&e - tables.data());
      if (std::none_of(tables.begin(), before, [&](const EmbeddingSpec& o) {
            return o.name == e.ids_of && o.ids_of.empty() && !o.multi_hot;
          })) {
        return InvalidArgumentError(what + ": it takes the ids of '" + e.ids_of +
                                    "', which is not a table with one-hot ids of its own "
                                    "declared before it (EmbeddingOf does not share a "
                                    "multi-hot field)");
      }
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
  if (builder.output_units() == 0) {
    return InvalidArgumentError(
        "a model must end with a Dense layer giving the class logits (or an add of branches "
        "that each end in one)");
  }
  if (builder.loss() == LossKind::kSigmoidCrossEntropy && builder.output_units() != 1) {
    return InvalidArgumentError(
        "a model trained with the sigmoid cross-entropy ends in one logit, "
        "but its last layer '" +
        specs_.back().name + "' gives " + std::to_string(builder.output_units()) +
        " (Dense(name, 1), or LossKind::kSoftmaxCrossEntropy)");
  }
  if (builder.loss() == LossKind::kMeanSquaredError && builder.output_units() != 1) {
    return InvalidArgumentError(
        "a regression model (the squared error) ends in one output, the predicted target, but "
        "its last layer '" +
        specs_.back().name + "' gives " + std::to_string(builder.output_units()) +
        " (Dense(name, 1))");
  }
  std::set<std::string> names;
  const std::vector<EmbeddingSpec>& tables = builder.embeddings();
  TOWERPS_ASSIGN_OR_RETURN(const int64_t embedded, CheckEmbeddings(tables, input_shape_, &names));
  const Shape first = tables.empty() ? input_shape_ : Shape{embedded + NumElements(input_shape_)};
  ModelInputs inputs{.dense_shape = input_shape_};
  int64_t offset = 0;
  for (const EmbeddingSpec& e : tables) {
    const int64_t width = int64_t{e.fields} * e.options.dim;
    inputs.columns.push_back({e.name, {offset, width}});
    offset += width;
  }
  inputs.columns.push_back({"dense", {offset, NumElements(input_shape_)}});
  int index = 0;
  TOWERPS_ASSIGN_OR_RETURN(auto layers,
                           BuildChain<T>(specs_, first, "", seed, &index, &names, &inputs));
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
