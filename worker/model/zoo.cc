#include "worker/model/zoo.h"

#include <map>

#include "towerps/registry.h"

namespace towerps::worker {

namespace {

// ResNet-20 for CIFAR-10 (He et al. 2016, section 4.2): a 3x3 stem of 16 filters, then three
// stages of three basic blocks with 16, 32 and 64 filters, the first block of the second and
// third stages halving the size with stride 2 and a 1x1 projection shortcut (the paper's
// option B), batch norm after every convolution, global average pooling and a 10-way dense
// layer: 0.27 M parameters.
ModelBuilder ResNet20() {
  ModelBuilder b({3, 32, 32});
  b.Conv2d("stem", 16, 3, 1, Padding::kSame).BatchNorm("stem_bn").Relu();
  int in_filters = 16;
  for (int stage = 0; stage < 3; ++stage) {
    const int filters = 16 << stage;
    for (int block = 0; block < 3; ++block) {
      const int stride = stage > 0 && block == 0 ? 2 : 1;
      const bool project = stride != 1 || filters != in_filters;
      const std::string name =
          "stage" + std::to_string(stage + 1) + "_block" + std::to_string(block + 1);
      b.Residual(
          name,
          [&](ModelBuilder& m) {
            m.Conv2d("conv1", filters, 3, stride, Padding::kSame).BatchNorm("bn1").Relu();
            m.Conv2d("conv2", filters, 3, 1, Padding::kSame).BatchNorm("bn2");
          },
          [&](ModelBuilder& s) {
            if (project) s.Conv2d("project", filters, 1, stride).BatchNorm("project_bn");
          });
      b.Relu();
      in_filters = filters;
    }
  }
  b.GlobalAvgPool().Dense("logits", 10, Init::kGlorot);
  return b;
}

// DLRM (Naumov et al. 2019) at a size for one machine, on Criteo's features: a bottom MLP
// 13-64-16 on the dense features; 26 tables (C1..C26, unbounded: --dataset criteo hashes each
// field's values) of dimension 16; the dot interaction of the bottom output and the 26 rows
// (27 vectors: 16 + 351 values); a top MLP 367-64-1.
ModelBuilder DlrmSmall() {
  ModelBuilder b({13});
  std::vector<std::string> tables;
  for (int f = 1; f <= 26; ++f) {
    tables.push_back("C" + std::to_string(f));
    b.Embedding(tables.back(), 1, {.rows = 0, .dim = 16, .init_scale = 0.05f});
  }
  b.Join("interaction", JoinKind::kDotInteraction,
         {{{"dense"},
           [](ModelBuilder& m) { m.Dense("bottom1", 64).Relu().Dense("bottom2", 16).Relu(); }},
          {tables, {}}});
  b.Dense("top1", 64).Relu().Dense("logit", 1, Init::kGlorot);
  b.Loss(LossKind::kSigmoidCrossEntropy);
  return b;
}

// Wide & Deep (Cheng et al. 2016) on Criteo's features: a linear model of the 26 fields (a
// table of dimension 1 looked up by the same ids: one weight per id) and the dense features,
// added to a deep MLP 429-256-128-1 on 16-dimensional rows of the fields and the dense features.
ModelBuilder WideDeep() {
  ModelBuilder b({13});
  b.Embedding("deep", 26, {.rows = 0, .dim = 16, .init_scale = 0.05f});
  b.EmbeddingOf("wide", "deep", {.rows = 0, .dim = 1, .init_scale = 0.0f});
  b.Join("wide_deep", JoinKind::kAdd,
         {{{"wide", "dense"}, [](ModelBuilder& m) { m.Dense("linear", 1, Init::kZeros); }},
          {{"deep", "dense"}, [](ModelBuilder& m) {
             m.Dense("fc1", 256).Relu().Dense("fc2", 128).Relu().Dense("logit", 1, Init::kGlorot);
           }}});
  b.Loss(LossKind::kSigmoidCrossEntropy);
  return b;
}

ModelBuilder Mlp() {
  ModelBuilder b({1, 28, 28});
  b.Dense("fc1", 256).Relu().Dense("fc2", 128).Relu().Dense("logits", 10, Init::kGlorot);
  return b;
}

ModelBuilder Cnn() {
  ModelBuilder b({1, 28, 28});
  b.Conv2d("conv1", 32, 3).Relu().MaxPool(2, 2);
  b.Conv2d("conv2", 64, 3).Relu().MaxPool(2, 2);
  b.Dense("fc1", 128).Relu().Dense("logits", 10, Init::kGlorot);
  return b;
}

ModelBuilder Cifar10() {
  const LrnOptions lrn{.depth_radius = 4, .bias = 1.0f, .alpha = 0.001f / 9.0f, .beta = 0.75f};
  ModelBuilder b({3, 24, 24});
  b.Conv2d("conv1", 64, 5, 1, Padding::kSame).Relu().MaxPool(3, 2, Padding::kSame).Lrn(lrn);
  b.Conv2d("conv2", 64, 5, 1, Padding::kSame).Relu().Lrn(lrn).MaxPool(3, 2, Padding::kSame);
  b.Dense("local3", 384).Relu().Dense("local4", 192).Relu();
  b.Dense("softmax_linear", 10, Init::kGlorot);
  return b;
}

// 8 categorical fields of 1000 ids each in one bounded table, beside 4 dense features.
ModelBuilder EmbedMlp() {
  ModelBuilder b({4});
  b.Embedding("embedding", 8, {.rows = 8000, .dim = 8, .init_scale = 0.05f});
  b.Dense("fc1", 64).Relu().Dense("logits", 4, Init::kGlorot);
  return b;
}

// embed-mlp with a multi-hot field beside its 8 one-hot ones: 0 to 6 ids per example, averaged
// into one row (as --dataset categorical makes its labels).
ModelBuilder BagMlp() {
  ModelBuilder b({4});
  b.Embedding("embedding", 8, {.rows = 8000, .dim = 8, .init_scale = 0.05f});
  b.EmbeddingBag("bag", BagPooling::kMean, {.rows = 0, .dim = 8, .init_scale = 0.05f});
  b.Dense("fc1", 64).Relu().Dense("logits", 4, Init::kGlorot);
  return b;
}

// Click-through rate on Criteo's features: the 26 categorical fields' rows (dim 16, one unbounded
// table: --dataset criteo hashes each field's values to ids of their own) beside the 13 dense
// features, into a 256-128 ReLU MLP and one logit.
ModelBuilder CtrMlp() {
  ModelBuilder b({13});
  b.Embedding("categories", 26, {.rows = 0, .dim = 16, .init_scale = 0.05f});
  b.Dense("fc1", 256).Relu().Dense("fc2", 128).Relu().Dense("logit", 1, Init::kGlorot);
  b.Loss(LossKind::kSigmoidCrossEntropy);
  return b;
}

// Regression on 16 features (--dataset regression, or npy with float y): one output, the
// predicted target, trained with the squared error and evaluated by RMSE.
ModelBuilder RegressionMlp() {
  ModelBuilder b({16});
  b.Dense("fc1", 64).Relu().Dense("out", 1, Init::kGlorot).Loss(LossKind::kMeanSquaredError);
  return b;
}

// The zoo: every model TowerPS ships, once.
const ZooEntry kZoo[] = {
    {"mlp", Mlp, "784-256-128-10 ReLU MLP (Fashion-MNIST)", ZooKind::kImage},
    {"cnn", Cnn, "2 convolutions, 2 dense layers (Fashion-MNIST)", ZooKind::kImage},
    {"cifar10", Cifar10, "the TensorFlow CIFAR-10 tutorial net, with LRN (CIFAR-10 crops)",
     ZooKind::kImage},
    {"resnet20", ResNet20, "ResNet-20 with batch norm (He et al. 2016; CIFAR-10)", ZooKind::kImage},
    {"embed-mlp", EmbedMlp, "8 embedding fields (dim 8) and a 64-unit MLP (--dataset categorical)",
     ZooKind::kCategorical},
    {"bag-mlp", BagMlp,
     "embed-mlp with a multi-hot field averaged by an EmbeddingBag (--dataset categorical)",
     ZooKind::kCategorical},
    {"ctr_mlp", CtrMlp,
     "26 embedding fields (dim 16) and 13 dense features, 256-128 MLP, click logit "
     "(--dataset criteo)",
     ZooKind::kClick},
    {"dlrm_small", DlrmSmall,
     "DLRM: bottom MLP 13-64-16, 26 tables of dim 16, dot interaction, top MLP 367-64-1 "
     "(--dataset criteo)",
     ZooKind::kClick},
    {"wide_deep", WideDeep,
     "Wide & Deep: linear over 26 fields and 13 dense features + MLP 429-256-128-1 "
     "(--dataset criteo)",
     ZooKind::kClick},
    {"regression_mlp", RegressionMlp,
     "16 features, 64-unit MLP, one output trained with the squared error (--dataset "
     "regression)",
     ZooKind::kRegression},
};

}  // namespace

std::span<const ZooEntry> Zoo() { return kZoo; }

std::vector<std::string> ZooModelNames() {
  std::vector<std::string> names;
  for (const ZooEntry& e : kZoo) names.emplace_back(e.name);
  return names;
}

Result<ModelBuilder> ZooModel(const std::string& name) {
  for (const ZooEntry& e : kZoo) {
    if (name == e.name) return e.build();
  }
  std::string known;
  for (const ZooEntry& e : kZoo) known += (known.empty() ? "" : ", ") + std::string(e.name);
  return NotFoundError("unknown model '" + name + "' (known: " + known + ")");
}

}  // namespace towerps::worker

namespace towerps {

void AddZooModels(Registry* registry) {
  // The click models train well with Adam on the dense layers and Adagrad on the tables, at a
  // constant rate (docs/PERFORMANCE.md, "Recommendation models").
  const std::map<std::string, std::string> click = {{"optimizer", "adam"},
                                                    {"lr", "0.001"},
                                                    {"lr-schedule", "constant"},
                                                    {"table-optimizer", "adagrad"},
                                                    {"table-lr", "0.05"}};
  for (const worker::ZooEntry& e : worker::Zoo()) {
    TOWERPS_CHECK(
        registry
            ->AddModel(e.name, {.summary = e.summary,
                                .build = e.build,
                                .recommended = e.kind == worker::ZooKind::kClick
                                                   ? click
                                                   : std::map<std::string, std::string>{}})
            .ok())
        << e.name;
  }
}

}  // namespace towerps
