#include "towerps/model_builder.h"

namespace towerps {

ModelBuilder& ModelBuilder::Conv2d(std::string name, int filters, int kernel, int stride,
                                   Padding padding, Init init) {
  LayerSpec& s = Add(LayerSpec::Kind::kConv2d);
  s.name = std::move(name);
  s.units = filters;
  s.kernel = kernel;
  s.stride = stride;
  s.padding = padding;
  s.init = init;
  return *this;
}

ModelBuilder& ModelBuilder::Dense(std::string name, int units, Init init) {
  LayerSpec& s = Add(LayerSpec::Kind::kDense);
  s.name = std::move(name);
  s.units = units;
  s.init = init;
  return *this;
}

ModelBuilder& ModelBuilder::Activation(ActivationKind kind) {
  Add(LayerSpec::Kind::kActivation).activation = kind;
  return *this;
}

ModelBuilder& ModelBuilder::MaxPool(int window, int stride, Padding padding) {
  LayerSpec& s = Add(LayerSpec::Kind::kPool);
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

ModelBuilder& ModelBuilder::Lrn(const LrnOptions& options) {
  Add(LayerSpec::Kind::kLrn).lrn = options;
  return *this;
}

ModelBuilder& ModelBuilder::Dropout(float rate) {
  Add(LayerSpec::Kind::kDropout).rate = rate;
  return *this;
}

ModelBuilder& ModelBuilder::BatchNorm(std::string name, BatchNormOptions options) {
  LayerSpec& s = Add(LayerSpec::Kind::kBatchNorm);
  s.name = std::move(name);
  s.batch_norm = options;
  return *this;
}

ModelBuilder& ModelBuilder::GlobalAvgPool() {
  Add(LayerSpec::Kind::kGlobalAvgPool);
  return *this;
}

ModelBuilder& ModelBuilder::Flatten() {
  Add(LayerSpec::Kind::kFlatten);
  return *this;
}

ModelBuilder& ModelBuilder::Residual(std::string name, const BranchFn& main,
                                     const BranchFn& shortcut) {
  ModelBuilder m(input_shape_), s(input_shape_);
  if (main) main(m);
  if (shortcut) shortcut(s);
  LayerSpec& spec = Add(LayerSpec::Kind::kResidual);
  spec.name = std::move(name);
  spec.main = std::move(m.specs_);
  spec.shortcut = std::move(s.specs_);
  return *this;
}

ModelBuilder& ModelBuilder::Join(std::string name, JoinKind kind,
                                 const std::vector<Branch>& branches) {
  LayerSpec& spec = Add(LayerSpec::Kind::kJoin);
  spec.name = std::move(name);
  spec.join = kind;
  for (const Branch& branch : branches) {
    ModelBuilder m(input_shape_);
    if (branch.layers) branch.layers(m);
    spec.branches.push_back({branch.inputs, std::move(m.specs_)});
  }
  return *this;
}

ModelBuilder& ModelBuilder::Embedding(std::string name, int fields, EmbeddingOptions options) {
  embeddings_.push_back({std::move(name), fields, options});
  return *this;
}

ModelBuilder& ModelBuilder::EmbeddingOf(std::string name, const std::string& ids_of,
                                        EmbeddingOptions options) {
  int fields = 0;  // building names an unknown ids_of
  for (const EmbeddingSpec& e : embeddings_) {
    if (e.name == ids_of && !e.multi_hot) fields = e.fields;
  }
  embeddings_.push_back({std::move(name), fields, options, ids_of});
  return *this;
}

ModelBuilder& ModelBuilder::EmbeddingBag(std::string name, BagPooling pooling,
                                         EmbeddingOptions options) {
  embeddings_.push_back({std::move(name), 1, options, "", /*multi_hot=*/true, /*pooling=*/pooling});
  return *this;
}

int ModelBuilder::multi_hot_fields() const {
  int bags = 0;
  for (const EmbeddingSpec& e : embeddings_) bags += e.multi_hot ? 1 : 0;
  return bags;
}

int ModelBuilder::categorical_fields() const {
  int fields = 0;
  for (const EmbeddingSpec& e : embeddings_) {
    fields += e.ids_of.empty() && !e.multi_hot ? e.fields : 0;
  }
  return fields;
}

namespace {

// The units of a chain's last layer when it is a Dense, or an add of branches that end in
// Denses of the same units (Wide & Deep's logits); else 0.
int LastUnits(const std::vector<LayerSpec>& chain) {
  if (chain.empty()) return 0;
  const LayerSpec& last = chain.back();
  if (last.kind == LayerSpec::Kind::kDense) return last.units;
  if (last.kind != LayerSpec::Kind::kJoin || last.join != JoinKind::kAdd) return 0;
  int units = -1;
  for (const BranchSpec& b : last.branches) {
    const int u = LastUnits(b.layers);
    if (u == 0 || (units != -1 && u != units)) return 0;
    units = u;
  }
  return units == -1 ? 0 : units;
}

}  // namespace

int ModelBuilder::output_units() const { return LastUnits(specs_); }

int ModelBuilder::num_classes() const {
  if (loss_ == LossKind::kMeanSquaredError) return 0;
  return loss_ == LossKind::kSigmoidCrossEntropy ? 2 : output_units();
}

}  // namespace towerps
