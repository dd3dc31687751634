// Whole-model checks: finite differences in double on the reference backend (a small model using
// every layer kind, and the zoo models on sampled weights), the fast float model against the
// double reference model, gradient-ready hooks, signatures and variable access.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/reference_backend.h"
#include "tests/testing/sanitized.h"
#include "tests/testing/status_assert.h"
#include "worker/model/model_factory.h"
#include "worker/model/zoo.h"

namespace towerps::worker {
namespace {

std::vector<double> RandomInput(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// Checks TrainStep's gradients against central differences of its mean loss (the training-mode
// forward: batch norm with the batch's statistics), on up to `samples` randomly chosen elements
// of every trainable variable (all of them when the variable is small). Moving statistics are
// not trained and are skipped.
void CheckModelGradients(const ModelBuilder& builder, int batch, int samples, uint32_t seed) {
  kernels::ReferenceBackend<double> backend;
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<double>(builder, &backend, seed));
  std::mt19937 rng(seed);
  // Random biases too, so no gradient is trivially zero.
  for (int v = 0; v < model->num_variables(); ++v) {
    if (model->variables()[v].shape.size() == 1) {
      for (double& b : model->value(v)) b = 0.1 * RandomInput(1, rng)[0];
    }
  }
  const auto x = RandomInput(batch * NumElements(model->input_shape()), rng);
  std::vector<int32_t> labels(model->regression() ? 0 : batch);  // a regression has targets
  for (auto& l : labels) l = std::uniform_int_distribution<int>(0, model->num_classes() - 1)(rng);
  const auto targets = RandomInput(batch, rng);
  if (model->regression()) model->SetTargets(targets.data());
  ASSERT_TRUE(model->TrainStep(x.data(), labels.data(), batch).ok());
  const double h = 1e-6;
  // The training-mode loss; Evaluate's (forward only, cheaper) where the two are the same
  // function, i.e. without batch norm.
  bool batch_norm = false;
  for (const auto& v : model->variables()) batch_norm |= v.kind != ps::VariableKind::kTrainable;
  const auto loss = [&] {
    return batch_norm ? model->TrainStep(x.data(), labels.data(), batch)
                      : model->Evaluate(x.data(), labels.data(), batch);
  };
  std::vector<std::vector<double>> grads;
  for (int v = 0; v < model->num_variables(); ++v) {
    grads.emplace_back(model->gradient(v).begin(), model->gradient(v).end());
  }
  for (int v = 0; v < model->num_variables(); ++v) {
    SCOPED_TRACE(model->variables()[v].name);
    if (model->variables()[v].kind != ps::VariableKind::kTrainable) continue;
    const std::vector<double>& grad = grads[v];
    auto value = model->value(v);
    std::vector<size_t> picks;
    if (static_cast<int>(value.size()) <= samples) {
      for (size_t i = 0; i < value.size(); ++i) picks.push_back(i);
    } else {
      for (int s = 0; s < samples; ++s) {
        picks.push_back(std::uniform_int_distribution<size_t>(0, value.size() - 1)(rng));
      }
    }
    double largest = 0;
    for (size_t i : picks) {
      const double old = value[i];
      value[i] = old + h;
      ASSERT_OK_AND_ASSIGN(const StepResult plus, loss());
      value[i] = old - h;
      ASSERT_OK_AND_ASSIGN(const StepResult minus, loss());
      value[i] = old;
      const double numeric = (plus.loss - minus.loss) / (2 * h);
      largest = std::max(largest, std::abs(numeric));
      EXPECT_NEAR(grad[i], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << "element " << i;
    }
    if (picks.size() == value.size()) {
      EXPECT_GT(largest, 1e-6) << "vacuous check";
    }
  }
}

ModelBuilder EveryLayerModel() {
  ModelBuilder b({2, 7, 6});
  b.Conv2d("conv1", 3, 3, 1, Padding::kSame).Relu().MaxPool(3, 2, Padding::kSame);
  b.Lrn({.depth_radius = 1, .bias = 1.0f, .alpha = 0.3f, .beta = 0.75f});
  b.Conv2d("conv2", 4, 2, 2, Padding::kValid, Init::kGlorot).Tanh().AvgPool(1, 1);
  b.Dense("fc1", 5).Sigmoid().Dense("logits", 3, Init::kGlorot);
  return b;
}

// The residual network's parts: a BN stem, a block with the identity shortcut, a strided block
// with a projection, global pooling.
ModelBuilder SmallResNet() {
  ModelBuilder b({2, 6, 6});
  b.Conv2d("stem", 3, 3, 1, Padding::kSame).Tanh().BatchNorm("stem_bn", {.epsilon = 1e-3f});
  b.Residual("block1", [](ModelBuilder& m) {
    m.Conv2d("conv1", 3, 3, 1, Padding::kSame).Tanh().BatchNorm("bn1", {.epsilon = 1e-3f});
  });
  b.Tanh();
  b.Residual(
      "block2",
      [](ModelBuilder& m) {
        m.Conv2d("conv1", 4, 3, 2, Padding::kSame).Tanh().Conv2d("conv2", 4, 3, 1, Padding::kSame);
      },
      [](ModelBuilder& s) { s.Conv2d("project", 4, 1, 2); });
  b.GlobalAvgPool().Dense("logits", 3, Init::kGlorot);
  return b;
}

// Join blocks without tables: a convolution on the image beside a dense layer on the whole
// input, concatenated; then two branches added (a Join further on takes its input whole).
ModelBuilder JoinModel() {
  ModelBuilder b({2, 5, 5});
  b.Join("j", JoinKind::kConcat,
         {{{"dense"}, [](ModelBuilder& m) { m.Conv2d("conv", 3, 3).Tanh().Flatten(); }},
          {{}, [](ModelBuilder& m) { m.Dense("fc", 4).Sigmoid(); }}});
  b.Join("k", JoinKind::kAdd,
         {{{}, [](ModelBuilder& m) { m.Dense("a", 3, Init::kGlorot); }},
          {{}, [](ModelBuilder& m) { m.Dense("b", 3, Init::kGlorot); }}});
  return b;
}

TEST(ModelGradientTest, EveryLayerKindFullCheck) {
  CheckModelGradients(EveryLayerModel(), 3, 1000, 1);
  CheckModelGradients(SmallResNet(), 3, 1000, 2);
  CheckModelGradients(JoinModel(), 3, 1000, 4);
}

TEST(ModelBuilderTest, JoinsAreCheckedAndNamed) {
  kernels::ReferenceBackend<float> backend;
  const auto error = [&](const ModelBuilder& b) { return BuildModel(b, &backend, 1).status(); };
  const auto dense = [](int units) {
    return [units](ModelBuilder& m) { m.Dense("d" + std::to_string(units), units); };
  };
  ModelBuilder unknown({4});
  unknown.Embedding("t", 2, {.dim = 3});
  unknown.Join("j", JoinKind::kConcat, {{{"dense", "u"}, {}}}).Dense("out", 2);
  EXPECT_EQ(error(unknown).message(),
            "join block 'j': branch 1 (dense, u) takes 'u', which is not an input of the model "
            "(its inputs: t, dense)");
  ModelBuilder later({4});
  later.Dense("fc", 3).Join("j", JoinKind::kConcat, {{{"dense"}, {}}}).Dense("out", 2);
  EXPECT_NE(error(later).message().find("only the model's first layer sees"), std::string::npos);
  ModelBuilder added({4});
  added.Join("j", JoinKind::kAdd, {{{}, dense(3)}, {{}, dense(2)}}).Dense("out", 2);
  EXPECT_NE(error(added).message().find("branch 1 gives [3] but branch 2 gives [2]"),
            std::string::npos)
      << error(added).message();
  ModelBuilder dot({4});
  dot.Embedding("t", 2, {.dim = 3});
  dot.Join("x", JoinKind::kDotInteraction, {{{"dense"}, dense(4)}, {{"t"}, {}}}).Dense("out", 2);
  EXPECT_NE(error(dot).message().find("dot interaction block 'x': branch 2 (t) gives 6 values, "
                                      "not vectors of the 4 that branch 1 (dense) gives"),
            std::string::npos)
      << error(dot).message();
  ModelBuilder shadow({4});
  shadow.Embedding("dense", 1, {.dim = 3}).Dense("out", 2);
  EXPECT_NE(error(shadow).message().find("'dense' names the model's dense features"),
            std::string::npos);
  ModelBuilder twice({4});
  twice.Join("j", JoinKind::kConcat, {{{"dense", "dense"}, {}}}).Dense("out", 2);
  EXPECT_NE(error(twice).message().find("takes 'dense' twice"), std::string::npos);
}

// One logit and the sigmoid cross-entropy: labels 0 and 1, two classes.
TEST(ModelGradientTest, BinaryModelFullCheck) {
  ModelBuilder b({5});
  b.Dense("fc1", 4).Tanh().Dense("logit", 1, Init::kGlorot).Loss(LossKind::kSigmoidCrossEntropy);
  CheckModelGradients(b, 6, 1000, 3);
}

TEST(ModelGradientTest, RegressionModelFullCheck) {
  ModelBuilder b({5});
  b.Dense("fc1", 4).Tanh().Dense("out", 1, Init::kGlorot).Loss(LossKind::kMeanSquaredError);
  CheckModelGradients(b, 6, 1000, 4);
}

TEST(ModelTest, RegressionLossIsTheMeanSquaredErrorOfItsTargets) {
  kernels::ReferenceBackend<double> backend;
  ModelBuilder b({2});
  b.Dense("out", 1, Init::kZeros).Loss(LossKind::kMeanSquaredError);
  EXPECT_EQ(b.num_classes(), 0);
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<double>(b, &backend, 1));
  EXPECT_TRUE(model->regression());
  EXPECT_EQ(model->num_classes(), 0);
  // out = x0 - x1 + 0.5: predictions 1.5, -0.5, 0.5 against targets 1, 0, 2.
  model->value(0)[0] = 1.0;
  model->value(0)[1] = -1.0;
  model->value(1)[0] = 0.5;
  const std::vector<double> x = {1, 0, 0, 1, 0, 0};
  const std::vector<double> targets = {1, 0, 2};
  auto missing = model->Evaluate(x.data(), nullptr, 3);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("SetTargets"), std::string::npos);
  model->SetTargets(targets.data());
  ASSERT_OK_AND_ASSIGN(const StepResult r, model->Evaluate(x.data(), nullptr, 3));
  EXPECT_NEAR(r.loss, (0.25 + 0.25 + 2.25) / 3, 1e-14);
  EXPECT_EQ(r.correct, 0);
  ASSERT_OK_AND_ASSIGN(const StepResult t, model->TrainStep(x.data(), nullptr, 3));
  EXPECT_NEAR(t.loss, r.loss, 1e-14);
  // d loss / d bias = 2/3 * the sum of the errors (0.5 - 0.5 - 1.5).
  EXPECT_NEAR(model->gradient(1)[0], 2.0 / 3 * -1.5, 1e-14);
  // One output only.
  ModelBuilder two({2});
  two.Dense("out", 2).Loss(LossKind::kMeanSquaredError);
  EXPECT_NE(BuildModel<double>(two, &backend, 1).status().message().find("ends in one output"),
            std::string::npos);
}

TEST(ModelTest, BinaryModelGivesProbabilitiesAndCountsLogitsAboveZeroAsOnes) {
  kernels::ReferenceBackend<double> backend;
  ModelBuilder b({2});
  b.Dense("logit", 1, Init::kZeros).Loss(LossKind::kSigmoidCrossEntropy);
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<double>(b, &backend, 1));
  EXPECT_EQ(model->num_classes(), 2);
  // logit = x0 - x1 + 0.5: examples with logits 1.5, -0.5, 0.5.
  model->value(0)[0] = 1.0;
  model->value(0)[1] = -1.0;
  model->value(1)[0] = 0.5;
  const std::vector<double> x = {1, 0, 0, 1, 0, 0};
  const std::vector<int32_t> labels = {1, 1, 0};
  ASSERT_OK_AND_ASSIGN(const StepResult r, model->Evaluate(x.data(), labels.data(), 3));
  const auto sigmoid = [](double z) { return 1 / (1 + std::exp(-z)); };
  ASSERT_EQ(r.probabilities.size(), 3u);
  EXPECT_DOUBLE_EQ(r.probabilities[0], sigmoid(1.5));
  EXPECT_DOUBLE_EQ(r.probabilities[1], sigmoid(-0.5));
  EXPECT_DOUBLE_EQ(r.probabilities[2], sigmoid(0.5));
  EXPECT_EQ(r.correct, 1);  // only the first: the second says 0, the third 1
  const double log_loss =
      -(std::log(sigmoid(1.5)) + std::log(sigmoid(-0.5)) + std::log(1 - sigmoid(0.5))) / 3;
  EXPECT_NEAR(r.loss, log_loss, 1e-14);
  // Training leaves them out; a label other than 0 or 1 is refused.
  ASSERT_OK_AND_ASSIGN(const StepResult t, model->TrainStep(x.data(), labels.data(), 3));
  EXPECT_TRUE(t.probabilities.empty());
  const int32_t two = 2;
  auto bad = model->TrainStep(x.data(), &two, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("label 2"), std::string::npos);
}

TEST(ModelGradientTest, ZooModelsSampled) {
  for (const std::string& name : ZooModelNames()) {
    SCOPED_TRACE(name);
    // ResNet-20's parts are checked in full above (SmallResNet); its own size makes a
    // double-precision finite-difference pass take minutes.
    if (name == "resnet20") continue;
    ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel(name));
    // Models with embedding tables take their rows per batch: embedding_model_test checks them.
    if (!builder.embeddings().empty()) continue;
    // Under the sanitizers every variable once; the release suite samples four.
    CheckModelGradients(builder, 2, testing::kSanitized ? 1 : 4, 2);
  }
}

TEST(ModelTest, FastFloatModelMatchesDoubleReference) {
  for (const std::string& name : ZooModelNames()) {
    SCOPED_TRACE(name);
    kernels::ReferenceBackend<double> ref_backend;
    ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({.intra_op_threads = 2}));
    ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel(name));
    if (!builder.embeddings().empty()) continue;  // embedding_model_test
    ASSERT_OK_AND_ASSIGN(auto ref, BuildModel<double>(builder, &ref_backend, 5));
    ASSERT_OK_AND_ASSIGN(auto fast, BuildModel<float>(builder, cpu.get(), 5));
    std::mt19937 rng(3);
    const int batch = 3;
    const auto xd = RandomInput(batch * NumElements(ref->input_shape()), rng);
    const std::vector<float> xf(xd.begin(), xd.end());
    const std::vector<double> xr(xf.begin(), xf.end());
    const std::vector<int32_t> labels = {1, 7, 3};
    const std::vector<double> targets_ref = {0.5, -1.25, 2.0};  // a regression's
    const std::vector<float> targets_fast(targets_ref.begin(), targets_ref.end());
    ref->SetTargets(targets_ref.data());
    fast->SetTargets(targets_fast.data());
    ASSERT_OK_AND_ASSIGN(const StepResult step_ref,
                         ref->TrainStep(xr.data(), labels.data(), batch));
    ASSERT_OK_AND_ASSIGN(const StepResult step_fast,
                         fast->TrainStep(xf.data(), labels.data(), batch));
    const double loss_ref = step_ref.loss;
    const double loss_fast = step_fast.loss;
    EXPECT_NEAR(loss_fast, loss_ref, 1e-4 * std::abs(loss_ref));
    for (int v = 0; v < ref->num_variables(); ++v) {
      auto g_ref = ref->gradient(v);
      auto g_fast = fast->gradient(v);
      double scale = 0;
      for (double g : g_ref) scale = std::max(scale, std::abs(g));
      ASSERT_GT(scale, 0) << ref->variables()[v].name;
      // A convolution's bias right before a batch norm has a zero gradient in exact arithmetic
      // (the norm removes the mean): float rounding is all there is, so that gets an absolute
      // bound.
      const double tolerance = std::max(1e-3 * scale, 1e-6);
      for (size_t i = 0; i < g_ref.size(); ++i) {
        ASSERT_NEAR(g_fast[i], g_ref[i], tolerance) << ref->variables()[v].name << " " << i;
      }
    }
  }
}

TEST(ModelTest, GradientHooksFireInReverseLayerOrderOncePerVariable) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("cnn"));
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(builder, cpu.get(), 1));
  std::vector<float> x(2 * 28 * 28, 0.5f);
  const std::vector<int32_t> labels = {0, 9};
  std::vector<int> order;
  ASSERT_TRUE(
      model->TrainStep(x.data(), labels.data(), 2, [&](int v) { order.push_back(v); }).ok());
  const std::vector<int> expected = {6, 7, 4, 5, 2, 3, 0, 1};  // logits, fc1, conv2, conv1
  EXPECT_EQ(order, expected);
}

TEST(ModelTest, VariablesAndSignature) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder cnn_builder, ZooModel("cnn"));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder mlp_builder, ZooModel("mlp"));
  ASSERT_OK_AND_ASSIGN(auto cnn, BuildModel<float>(cnn_builder, cpu.get(), 1));
  ASSERT_EQ(cnn->num_variables(), 8);
  EXPECT_EQ(cnn->variables()[0].name, "conv1/kernel");
  EXPECT_EQ(cnn->variables()[0].shape, (Shape{32, 1, 3, 3}));
  EXPECT_EQ(cnn->variables()[4].shape, (Shape{64 * 5 * 5, 128}));
  // Same structure, other seed: same signature. Other structure: another one.
  ASSERT_OK_AND_ASSIGN(auto cnn2, BuildModel<float>(cnn_builder, cpu.get(), 2));
  EXPECT_EQ(cnn->signature(), cnn2->signature());
  ASSERT_OK_AND_ASSIGN(auto mlp, BuildModel<float>(mlp_builder, cpu.get(), 1));
  EXPECT_NE(cnn->signature(), mlp->signature());
  ModelBuilder wider({1, 28, 28});
  wider.Dense("fc1", 257).Relu().Dense("fc2", 128).Relu().Dense("logits", 10);
  ASSERT_OK_AND_ASSIGN(auto wider_model, BuildModel<float>(wider, cpu.get(), 1));
  EXPECT_NE(wider_model->signature(), mlp->signature());
  EXPECT_EQ(mlp->num_parameters(), 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);
}

TEST(ModelTest, GetAndSetVariables) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("mlp"));
  ASSERT_OK_AND_ASSIGN(auto mlp, BuildModel<float>(builder, cpu.get(), 1));
  Tensor t = mlp->GetVariable(1);
  ASSERT_EQ(t.shape(), (Shape{256}));
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = static_cast<float>(i);
  ASSERT_TRUE(mlp->SetVariable(1, t).ok());
  EXPECT_EQ(mlp->value(1)[255], 255.0f);
  Status bad = mlp->SetVariable(0, t);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("fc1/kernel"), std::string::npos) << bad.message();
  EXPECT_FALSE(mlp->SetVariable(99, t).ok());
}

TEST(ModelTest, BadBatchAndLabelsAreErrors) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("mlp"));
  ASSERT_OK_AND_ASSIGN(auto mlp, BuildModel<float>(builder, cpu.get(), 1));
  std::vector<float> x(784, 0.1f);
  const int32_t bad_label = 10;
  auto r = mlp->TrainStep(x.data(), &bad_label, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("label 10"), std::string::npos);
  EXPECT_FALSE(mlp->Evaluate(x.data(), &bad_label, 0).ok());
}

TEST(ModelBuilderTest, RejectsBadModels) {
  kernels::ReferenceBackend<float> backend;
  EXPECT_FALSE(BuildModel<float>(ModelBuilder({4}).Relu(), &backend, 1).ok());  // no logits layer
  auto dup = BuildModel<float>(ModelBuilder({4}).Dense("a", 3).Dense("a", 2), &backend, 1);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("'a' is used twice"), std::string::npos);
  auto conv_on_vector =
      BuildModel<float>(ModelBuilder({4}).Conv2d("c", 2, 3).Dense("d", 2), &backend, 1);
  EXPECT_FALSE(conv_on_vector.ok());
  EXPECT_EQ(ZooModel("resnet").status().code(), StatusCode::kNotFound);
  auto two_logits = BuildModel<float>(
      ModelBuilder({4}).Dense("out", 2).Loss(LossKind::kSigmoidCrossEntropy), &backend, 1);
  ASSERT_FALSE(two_logits.ok());
  EXPECT_NE(two_logits.status().message().find("'out' gives 2"), std::string::npos)
      << two_logits.status().message();
}

TEST(ModelTest, SameSeedSameWeightsAcrossScalarTypes) {
  kernels::ReferenceBackend<float> fb;
  kernels::ReferenceBackend<double> db;
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("cnn"));
  ASSERT_OK_AND_ASSIGN(auto f, BuildModel<float>(builder, &fb, 42));
  ASSERT_OK_AND_ASSIGN(auto d, BuildModel<double>(builder, &db, 42));
  ASSERT_OK_AND_ASSIGN(auto f2, BuildModel<float>(builder, &fb, 43));
  EXPECT_EQ(f->value(0)[5], static_cast<float>(d->value(0)[5]));
  EXPECT_NE(f->value(0)[5], f2->value(0)[5]);
}

}  // namespace
}  // namespace towerps::worker
