#include "towerps/registry.h"

#include <algorithm>
#include <cctype>

namespace towerps {

namespace {

template <typename Def>
Status CheckNew(const std::vector<std::pair<std::string, Def>>& entries, const std::string& kind,
                const std::string& name, bool has_function) {
  if (name.empty()) return InvalidArgumentError("a " + kind + " needs a name");
  if (name.find_first_of(" ,=\t\n") != std::string::npos) {
    return InvalidArgumentError(kind + " name '" + name +
                                "' must not contain spaces, commas or '=' (it is a flag value)");
  }
  for (const auto& [existing, def] : entries) {
    if (existing == name) return InvalidArgumentError(kind + " '" + name + "' is registered twice");
  }
  if (!has_function) {
    return InvalidArgumentError(kind + " '" + name + "' has no " +
                                (kind == "model" ? "build" : "load") + " function");
  }
  return Status::Ok();
}

template <typename Def>
std::vector<std::string> Names(const std::vector<std::pair<std::string, Def>>& entries) {
  std::vector<std::string> names;
  for (const auto& [name, def] : entries) names.push_back(name);
  return names;
}

std::string Join(const std::vector<std::string>& names, const std::string& last_separator) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i == 0 ? "" : i + 1 == names.size() ? last_separator : ", ") + names[i];
  }
  return out;
}

std::string ShapeText(const Shape& shape) {
  std::string out;
  for (int64_t d : shape) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

// What an example holds beside categorical ids: "13 dense features and 26 categorical ids",
// "4 dense features", "1x28x28".
std::string InputsText(const Shape& shape, int fields, int multi_hot) {
  std::string text =
      shape.size() == 1 ? std::to_string(shape[0]) + " dense features" : ShapeText(shape);
  if (fields > 0)
    text += (multi_hot > 0 ? ", " : " and ") + std::to_string(fields) + " categorical ids";
  if (multi_hot > 0) {
    text += " and " + std::to_string(multi_hot) +
            (multi_hot == 1 ? " multi-hot field" : " multi-hot fields");
  }
  return text;
}

}  // namespace

Status Registry::AddModel(const std::string& name, ModelDef def) {
  if (def.build && def.build_with_options) {
    return InvalidArgumentError("model '" + name +
                                "' has both build and build_with_options; give one");
  }
  TOWERPS_RETURN_IF_ERROR(
      CheckNew(models_, "model", name, static_cast<bool>(def.build || def.build_with_options)));
  models_.emplace_back(name, std::move(def));
  return Status::Ok();
}

Status Registry::AddDataset(const std::string& name, DatasetDef def) {
  TOWERPS_RETURN_IF_ERROR(CheckNew(datasets_, "dataset", name, static_cast<bool>(def.load)));
  datasets_.emplace_back(name, std::move(def));
  return Status::Ok();
}

Status Registry::AddOption(const std::string& name, OptionDef def) {
  const bool well_formed = !name.empty() && std::isalnum(static_cast<unsigned char>(name[0])) &&
                           std::all_of(name.begin(), name.end(), [](char c) {
                             return std::isalnum(static_cast<unsigned char>(c)) || c == '-';
                           });
  if (!well_formed) {
    return InvalidArgumentError("option '" + name +
                                "': a flag's name is letters, digits and '-', without the "
                                "leading '--'");
  }
  TOWERPS_RETURN_IF_ERROR(CheckNew(options_, "option", name, true));
  option_values_[name] = def.default_value;
  options_.emplace_back(name, std::move(def));
  return Status::Ok();
}

Status Registry::SetOptionValues(const UserOptions& values) {
  for (const auto& [name, value] : values) {
    if (option_values_.count(name) == 0) {
      return InvalidArgumentError("no option '" + name + "' was added to the registry");
    }
  }
  for (const auto& [name, value] : values) option_values_[name] = value;
  return Status::Ok();
}

const ModelDef* Registry::FindModel(const std::string& model) const {
  for (const auto& [name, def] : models_) {
    if (name == model) return &def;
  }
  return nullptr;
}

Result<ModelBuilder> Registry::DescribeModel(const std::string& model) const {
  const ModelDef* def = FindModel(model);
  if (def == nullptr) {
    return NotFoundError("unknown model '" + model + "' (known: " + Join(ModelNames(), ", ") + ")");
  }
  return def->build ? def->build() : def->build_with_options(option_values_);
}

Result<const DatasetDef*> Registry::FindDataset(const std::string& dataset) const {
  for (const auto& [name, def] : datasets_) {
    if (name == dataset) return &def;
  }
  return NotFoundError("unknown dataset '" + dataset + "' (known: " + Join(DatasetNames(), ", ") +
                       ")");
}

std::vector<std::string> Registry::ModelNames() const { return Names(models_); }
std::vector<std::string> Registry::DatasetNames() const { return Names(datasets_); }

Status Registry::CheckFits(const std::string& model, const std::string& dataset,
                           DataRequest request) const {
  request.options = option_values_;
  TOWERPS_ASSIGN_OR_RETURN(const ModelBuilder builder, DescribeModel(model));
  TOWERPS_ASSIGN_OR_RETURN(const DatasetDef* def, FindDataset(dataset));
  if (!def->probe) return Status::Ok();
  request.model_input = builder.input_shape();
  request.model_fields = builder.categorical_fields();
  request.model_multi_hot = builder.multi_hot_fields();
  TOWERPS_ASSIGN_OR_RETURN(const DatasetInfo info, def->probe(request));
  if (info.example_shape != builder.input_shape() || info.fields != builder.categorical_fields() ||
      info.multi_hot != builder.multi_hot_fields()) {
    std::vector<std::string> fitting;
    for (const auto& [name, other] : models_) {
      Result<ModelBuilder> b_or = DescribeModel(name);
      if (!b_or.ok()) continue;
      const ModelBuilder& b = *b_or;
      request.model_input = b.input_shape();
      request.model_fields = b.categorical_fields();
      request.model_multi_hot = b.multi_hot_fields();
      Result<DatasetInfo> fit = def->probe(request);
      if (fit.ok() && fit->example_shape == request.model_input &&
          fit->fields == request.model_fields && fit->multi_hot == request.model_multi_hot) {
        fitting.push_back(name);
      }
    }
    // "expects 1x28x28 inputs, but cifar10 examples are 3x32x32" for images, and with
    // categorical ids on either side "expects 13 dense features and 26 categorical ids per
    // example, but fashion-mnist examples hold 1x28x28".
    const bool categorical = info.fields > 0 || builder.categorical_fields() > 0 ||
                             info.multi_hot > 0 || builder.multi_hot_fields() > 0;
    const std::string wants = categorical
                                  ? InputsText(builder.input_shape(), builder.categorical_fields(),
                                               builder.multi_hot_fields()) +
                                        " per example"
                                  : ShapeText(builder.input_shape()) + " inputs";
    const std::string has =
        categorical
            ? " examples hold " + InputsText(info.example_shape, info.fields, info.multi_hot)
            : " examples are " + ShapeText(info.example_shape);
    return InvalidArgumentError(
        "model " + model + " expects " + wants + ", but " + dataset + has + " (" +
        (fitting.empty() ? "choose" : "choose --model " + Join(fitting, " or ") + ", or") +
        " another --dataset)");
  }
  const bool regression = builder.loss() == LossKind::kMeanSquaredError;
  if (regression != info.regression) {
    return InvalidArgumentError(
        regression ? "model " + model + " predicts float targets (the squared error), but " +
                         dataset + " has class labels (choose a classifier, or a dataset with " +
                         "targets: --dataset regression, or npy with float y)"
                   : "model " + model + " predicts classes, but " + dataset +
                         " has float targets (choose a model with Loss(LossKind::"
                         "kMeanSquaredError), e.g. --model regression_mlp)");
  }
  if (regression) return Status::Ok();
  if (builder.loss() == LossKind::kSigmoidCrossEntropy && info.num_classes > 2) {
    return InvalidArgumentError("model " + model + " predicts binary labels (one logit, sigmoid " +
                                "loss), but " + dataset + " has " +
                                std::to_string(info.num_classes) +
                                " classes (choose a model with a softmax output)");
  }
  if (info.num_classes > builder.num_classes()) {
    return InvalidArgumentError("model " + model + " has " +
                                std::to_string(builder.output_units()) + " outputs, but " +
                                dataset + " has " + std::to_string(info.num_classes) +
                                " classes (give the model's last Dense layer at least " +
                                std::to_string(info.num_classes) + " units)");
  }
  return Status::Ok();
}

Registry StockRegistry() {
  Registry registry;
  AddZooModels(&registry);
  AddStockDatasets(&registry);
  return registry;
}

}  // namespace towerps
