// ModelBuilder: the description of a model, a chain of layers and residual blocks ending in a
// Dense layer of class logits. TowerPS builds it on every tower of every worker, with the same
// seeded initial weights, and trains it with a softmax cross-entropy loss.
//
//   towerps::ModelBuilder b({1, 28, 28});
//   b.Conv2d("conv1", 32, 3).Relu().MaxPool(2, 2).Dense("fc1", 128).Relu().Dense("logits", 10);
//
// A residual block is two branches joined by an add, each described on a builder of its own:
//
//   b.Residual("block1",
//              [](towerps::ModelBuilder& m) {
//                m.Conv2d("conv1", 16, 3, 1, towerps::Padding::kSame).BatchNorm("bn1").Relu();
//                m.Conv2d("conv2", 16, 3, 1, towerps::Padding::kSame).BatchNorm("bn2");
//              })  // no shortcut: the identity
//    .Relu();
//
// Its layers' variables are named "<block>/<layer>/...", e.g. "block1/conv1/kernel".
//
// A model with several inputs starts with a Join: branches that each take some of the model's
// inputs by name ("dense", the dense features, and each embedding table's rows), run layers of
// their own, and are joined by an add, a concatenation or DLRM's dot interaction (JoinKind).
// DLRM (Naumov et al. 2019), its bottom MLP beside 26 tables and its top MLP after:
//
//   towerps::ModelBuilder b({13});
//   std::vector<std::string> tables;
//   for (int f = 1; f <= 26; ++f) {
//     tables.push_back("C" + std::to_string(f));
//     b.Embedding(tables.back(), 1, {.dim = 16});
//   }
//   b.Join("interaction", towerps::JoinKind::kDotInteraction,
//          {{{"dense"}, [](towerps::ModelBuilder& m) {
//             m.Dense("bottom1", 64).Relu().Dense("bottom2", 16).Relu(); }},
//           {tables, {}}})                                 // the rows as they are
//    .Dense("top1", 64).Relu().Dense("logit", 1)
//    .Loss(towerps::LossKind::kSigmoidCrossEntropy);
//
// Only the model's first layer sees its inputs by name; a Join further on takes its input whole
// in every branch (names empty), as a Residual's branches do.
//
// Categorical features go through embedding tables, declared before the layers: each example's
// `fields` ids are looked up in the table, and the rows are concatenated, field after field and
// table after table, in front of the dense input, which the first layer then sees whole:
//
//   towerps::ModelBuilder b({13});                            // 13 dense features
//   b.Embedding("categories", 26, {.rows = 0, .dim = 16})     // 26 ids per example
//    .Dense("fc1", 256).Relu().Dense("logits", 2);            // fc1 sees 26 * 16 + 13 inputs
//
// A model for binary labels (clicks, say) ends in one logit and says so:
//
//   b.Dense("fc1", 256).Relu().Dense("logit", 1).Loss(towerps::LossKind::kSigmoidCrossEntropy);
//
// A table is a variable of the parameter servers (rows created when first trained, pulled by
// the ids of each batch); its examples' ids come from Dataset::ids. A multi-hot field (the
// movies a user watched, say: any number of ids per example) is pooled by an EmbeddingBag, its
// ids coming from Dataset::multi_hot:
//
//   b.EmbeddingBag("watched", towerps::BagPooling::kMean, {.dim = 16})  // one row of 16
//
// Contract: the builder only records; building validates (shapes that do not fit, duplicate
// names, a last layer that is not a Dense, a sigmoid loss on more than one logit) and the error
// names the layer, e.g. "layer name 'a' is used twice". Layers with parameters need unique names;
// the others are named "layer<index>". Value type: copies are independent; not synchronised.
#ifndef TOWERPS_MODEL_BUILDER_H_
#define TOWERPS_MODEL_BUILDER_H_

#include <functional>
#include <string>
#include <vector>

#include "towerps/layer_options.h"
#include "towerps/shape.h"

namespace towerps {

struct BranchSpec;

// One recorded layer. Read-only to users: TowerPS builds the model from these.
struct LayerSpec {
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
    kResidual,
    kJoin
  };
  Kind kind = Kind::kDense;
  std::string name;
  int units = 0;  // filters for Conv2d
  int kernel = 0, stride = 1;
  Padding padding = Padding::kValid;
  Init init = Init::kHe;
  ActivationKind activation = ActivationKind::kRelu;
  PoolKind pool = PoolKind::kMax;
  LrnOptions lrn;
  float rate = 0;  // Dropout
  BatchNormOptions batch_norm;
  std::vector<LayerSpec> main, shortcut;  // kResidual's branches
  JoinKind join = JoinKind::kConcat;      // kJoin's
  std::vector<BranchSpec> branches;       // kJoin's
};

// One branch of a Join, as ModelBuilder::Join recorded it.
struct BranchSpec {
  std::vector<std::string> inputs;  // model inputs by name; empty: the block's whole input
  std::vector<LayerSpec> layers;
};

// One embedding table of a model, as ModelBuilder::Embedding recorded it.
struct EmbeddingSpec {
  std::string name;  // the table's variable name
  int fields = 1;    // ids per example looked up in it
  EmbeddingOptions options;
  std::string ids_of{};  // EmbeddingOf: the earlier table whose ids it looks up; "": its own
  // EmbeddingBag: the table looks up a multi-hot field (Dataset::multi_hot), one pooled row per
  // example (fields is 1).
  bool multi_hot = false;
  BagPooling pooling = BagPooling::kSum;
};

class ModelBuilder {
 public:
  // Per-example input shape: [c, h, w] for images, [features] for vectors. With embedding
  // tables, the dense features beside the categorical ones.
  explicit ModelBuilder(Shape input_shape) : input_shape_(std::move(input_shape)) {}
  // `fields` ids per example looked up in the table `name`, their rows concatenated in front of
  // the dense input (see above). Building checks the options and that names are unique.
  ModelBuilder& Embedding(std::string name, int fields, EmbeddingOptions options = {});
  // A table looked up by the same ids as the earlier table `ids_of` (it takes no ids of its
  // own): Wide & Deep's weight per id beside its rows, say. Its rows follow, as for Embedding.
  ModelBuilder& EmbeddingOf(std::string name, const std::string& ids_of,
                            EmbeddingOptions options = {});
  // A multi-hot field (the next of Dataset::multi_hot, in the order of these calls) looked up in
  // the table `name`: each example's ids, as many as it has, pooled into one row (`pooling`)
  // that takes its place among the tables' rows, as an Embedding of one field does.
  ModelBuilder& EmbeddingBag(std::string name, BagPooling pooling, EmbeddingOptions options = {});

  // filters outputs of kernel x kernel windows, plus a bias per filter.
  ModelBuilder& Conv2d(std::string name, int filters, int kernel, int stride = 1,
                       Padding padding = Padding::kValid, Init init = Init::kHe);
  // A fully connected layer of `units` outputs and a bias; flattens [c, h, w] inputs.
  ModelBuilder& Dense(std::string name, int units, Init init = Init::kHe);
  ModelBuilder& Relu() { return Activation(ActivationKind::kRelu); }
  ModelBuilder& Tanh() { return Activation(ActivationKind::kTanh); }
  ModelBuilder& Sigmoid() { return Activation(ActivationKind::kSigmoid); }
  ModelBuilder& Activation(ActivationKind kind);
  ModelBuilder& MaxPool(int window, int stride, Padding padding = Padding::kValid);
  ModelBuilder& AvgPool(int window, int stride, Padding padding = Padding::kValid);
  ModelBuilder& Lrn(const LrnOptions& options);
  // Drops each input with probability `rate` while training (inverted dropout).
  ModelBuilder& Dropout(float rate);
  // Batch normalization; its variables are trainable gamma and beta and the moving mean and
  // variance, which the servers keep (docs/API.md, "Batch norm").
  ModelBuilder& BatchNorm(std::string name, BatchNormOptions options = {});
  // [c, h, w] to [c], the mean of each channel.
  ModelBuilder& GlobalAvgPool();
  // Any shape to a vector of its elements.
  ModelBuilder& Flatten();
  // y = main(x) + shortcut(x), each branch described on a fresh builder (whose input shape is
  // ignored: a branch takes the block's input); no shortcut, or one that adds no layers, is the
  // identity. Building checks that the branches end in the same shape.
  using BranchFn = std::function<void(ModelBuilder&)>;
  ModelBuilder& Residual(std::string name, const BranchFn& main, const BranchFn& shortcut = {});
  // One branch of a Join: the model's inputs it takes, by name ("dense" for the dense features,
  // an embedding table's name for its rows; empty: the block's whole input), side by side in
  // that order, and its layers (none: the inputs as they are).
  struct Branch {
    std::vector<std::string> inputs;
    BranchFn layers;
  };
  // The branches joined by `kind` (see above). Building checks the names, that the branches
  // chain, and that their outputs can be joined (the same shape to add; vectors of the first
  // branch's size for the dot interaction). Variables are named "<block>/<layer>/...".
  ModelBuilder& Join(std::string name, JoinKind kind, const std::vector<Branch>& branches);

  // The loss the model is trained with; softmax cross-entropy unless set.
  ModelBuilder& Loss(LossKind kind) {
    loss_ = kind;
    return *this;
  }

  const Shape& input_shape() const { return input_shape_; }
  LossKind loss() const { return loss_; }
  const std::vector<LayerSpec>& layers() const { return specs_; }
  const std::vector<EmbeddingSpec>& embeddings() const { return embeddings_; }
  // Ids per example over every table that has its own (what Dataset::fields must be).
  int categorical_fields() const;
  // EmbeddingBag tables (what Dataset::multi_hot's size must be).
  int multi_hot_fields() const;
  // The units of the last layer when it is a Dense (or a Join adding branches that end in Denses
  // of those units), else 0.
  int output_units() const;
  // The classes the model tells apart: 2 for a sigmoid loss, 0 for a regression (the squared
  // error), else output_units().
  int num_classes() const;

 private:
  // Appends a spec of `kind` and returns it for the caller to fill in.
  LayerSpec& Add(LayerSpec::Kind kind) {
    specs_.emplace_back();
    specs_.back().kind = kind;
    return specs_.back();
  }

  Shape input_shape_;
  LossKind loss_ = LossKind::kSoftmaxCrossEntropy;
  std::vector<LayerSpec> specs_;
  std::vector<EmbeddingSpec> embeddings_;
};

}  // namespace towerps

#endif  // TOWERPS_MODEL_BUILDER_H_
