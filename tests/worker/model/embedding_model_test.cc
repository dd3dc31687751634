// Models with embedding tables (ModelBuilder::Embedding and EmbeddingBag; worker/model/model.h):
// the tables' rows in front of the dense features, checked by finite differences in double on the
// reference backend (rows repeated in a batch included), the float CPU model against that
// reference, the variable list and signature, and the builder's checks.
#include <gtest/gtest.h>

#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/reference_backend.h"
#include "tests/testing/status_assert.h"
#include "worker/model/model_factory.h"

namespace towerps::worker {
namespace {

// Two tables of different dims over 3 dense features: the first layer sees 2*4 + 3*2 + 3.
ModelBuilder TwoTables() {
  ModelBuilder b({3});
  b.Embedding("user", 2, {.rows = 100, .dim = 4, .init_scale = 0.5f})
      .Embedding("item", 3, {.rows = 0, .dim = 2})
      .Dense("fc1", 5)
      .Tanh()
      .Dense("logits", 3, Init::kGlorot);
  return b;
}

// One-hot tables beside two multi-hot fields, one summed and one averaged.
ModelBuilder WithBags() {
  ModelBuilder b({3});
  b.Embedding("user", 2, {.rows = 100, .dim = 4, .init_scale = 0.5f})
      .EmbeddingBag("watched", BagPooling::kSum, {.rows = 0, .dim = 3, .init_scale = 0.5f})
      .EmbeddingBag("liked", BagPooling::kMean, {.rows = 0, .dim = 2, .init_scale = 0.5f})
      .Dense("fc1", 5)
      .Tanh()
      .Dense("logits", 3, Init::kGlorot);
  return b;
}

// A batch's tables: each table's rows for `unique` distinct ids, and per example and field the
// row it uses (repeats on purpose: the gradient of a shared row sums its uses). A bag table's
// examples use 0 to 4 rows each, example 1 none.
template <typename T>
struct TableInputs {
  std::vector<std::vector<T>> rows;
  std::vector<std::vector<uint32_t>> inverse, bags;
  std::vector<int64_t> unique;

  TableInputs(const Model<T>& model, int batch, std::mt19937& rng) {
    std::uniform_real_distribution<double> value(-1.0, 1.0);
    for (int t = 0; t < model.num_tables(); ++t) {
      const EmbeddingSpec& spec = model.table(t);
      unique.push_back(3);  // fewer rows than uses
      rows.emplace_back(static_cast<size_t>(3 * spec.options.dim));
      for (T& v : rows.back()) v = static_cast<T>(value(rng));
      bags.emplace_back();
      int64_t uses = int64_t{batch} * spec.fields;
      if (spec.multi_hot) {
        bags.back().push_back(0);
        for (int b = 0; b < batch; ++b) {
          const uint32_t n = b == 1 ? 0 : std::uniform_int_distribution<uint32_t>(0, 4)(rng);
          bags.back().push_back(bags.back().back() + n);
        }
        uses = bags.back().back();
      }
      inverse.emplace_back(static_cast<size_t>(uses));
      for (uint32_t& i : inverse.back()) i = std::uniform_int_distribution<uint32_t>(0, 2)(rng);
    }
  }
  void SetInto(Model<T>& model) {
    for (int t = 0; t < model.num_tables(); ++t) {
      model.SetTableRows(t, rows[t].data(), unique[t], inverse[t].data(),
                         bags[t].empty() ? nullptr : bags[t].data());
    }
  }
};

// DLRM's structure at a toy size: a bottom MLP on 3 dense features, three tables of dim 4 (one
// with 2 fields), their rows and the bottom output joined by the dot interaction (k = 5 vectors:
// 4 + 10 values), a top MLP and one logit.
ModelBuilder SmallDlrm() {
  ModelBuilder b({3});
  b.Embedding("a", 1, {.rows = 50, .dim = 4, .init_scale = 0.5f})
      .Embedding("b", 2, {.rows = 0, .dim = 4, .init_scale = 0.5f})
      .Embedding("c", 1, {.rows = 0, .dim = 4, .init_scale = 0.5f});
  b.Join("interaction", JoinKind::kDotInteraction,
         {{{"dense"}, [](ModelBuilder& m) { m.Dense("bottom1", 5).Tanh().Dense("bottom2", 4); }},
          {{"a", "b", "c"}, {}}});
  b.Dense("top1", 3).Tanh().Dense("logit", 1, Init::kGlorot);
  b.Loss(LossKind::kSigmoidCrossEntropy);
  return b;
}

// Wide & Deep's structure: a linear model of a dim-1 table and the dense features, added to an
// MLP of a dim-3 table and the same dense features (they share the "dense" columns, and the
// two tables the ids).
ModelBuilder SmallWideDeep() {
  ModelBuilder b({3});
  b.Embedding("deep", 2, {.rows = 0, .dim = 3, .init_scale = 0.5f})
      .EmbeddingOf("wide", "deep", {.rows = 0, .dim = 1, .init_scale = 0.5f});
  b.Join("wide_deep", JoinKind::kAdd,
         {{{"wide", "dense"}, [](ModelBuilder& m) { m.Dense("linear", 1, Init::kGlorot); }},
          {{"deep", "dense"},
           [](ModelBuilder& m) { m.Dense("hidden", 4).Tanh().Dense("out", 1, Init::kGlorot); }}});
  b.Loss(LossKind::kSigmoidCrossEntropy);
  return b;
}

// Every table row's gradient, and every dense variable's (sampled), against central differences
// of the mean loss, on the reference backend in double.
void CheckRowAndDenseGradients(const ModelBuilder& builder, const std::vector<int32_t>& labels) {
  const int batch = static_cast<int>(labels.size());
  kernels::ReferenceBackend<double> backend;
  auto built = BuildModel<double>(builder, &backend, 3);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  auto model = std::move(*built);
  std::mt19937 rng(5);
  TableInputs<double> tables(*model, batch, rng);
  tables.SetInto(*model);
  std::vector<double> x(batch * NumElements(model->input_shape()));
  for (double& v : x) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  for (int v = 0; v < model->num_variables(); ++v) {  // random biases: no zero gradients
    if (model->variables()[v].shape.size() == 1) {
      for (double& b : model->value(v)) b = std::uniform_real_distribution<double>(-0.2, 0.2)(rng);
    }
  }
  ASSERT_TRUE(model->TrainStep(x.data(), labels.data(), batch).ok());
  const double h = 1e-6;
  const auto loss_change = [&](double* value) {
    const double old = *value;
    *value = old + h;
    const double plus = model->Evaluate(x.data(), labels.data(), batch)->loss;
    *value = old - h;
    const double minus = model->Evaluate(x.data(), labels.data(), batch)->loss;
    *value = old;
    return (plus - minus) / (2 * h);
  };
  for (int t = 0; t < model->num_tables(); ++t) {
    SCOPED_TRACE(model->table(t).name);
    const std::vector<double> grad = model->table_gradient(t);
    ASSERT_EQ(grad.size(), tables.rows[t].size());
    double largest = 0;
    for (size_t i = 0; i < grad.size(); ++i) {
      const double numeric = loss_change(&tables.rows[t][i]);
      largest = std::max(largest, std::abs(numeric));
      EXPECT_NEAR(grad[i], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << "element " << i;
    }
    EXPECT_GT(largest, 1e-4) << "vacuous check";
  }
  std::vector<std::vector<double>> grads;
  for (int v = 0; v < model->num_variables(); ++v) {
    grads.emplace_back(model->gradient(v).begin(), model->gradient(v).end());
  }
  for (int v = 0; v < model->num_variables(); ++v) {
    SCOPED_TRACE(model->variables()[v].name);
    auto w = model->value(v);
    double largest = 0;
    for (size_t i = 0; i < w.size(); i += 3) {
      const double numeric = loss_change(&w[i]);
      largest = std::max(largest, std::abs(numeric));
      EXPECT_NEAR(grads[v][i], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << "element " << i;
    }
    EXPECT_GT(largest, 1e-5) << "vacuous check";
  }
}

TEST(EmbeddingModelTest, TableRowGradientsMatchFiniteDifferences) {
  CheckRowAndDenseGradients(TwoTables(), {0, 2, 1, 2});
}

TEST(EmbeddingModelTest, BagRowGradientsMatchFiniteDifferences) {
  CheckRowAndDenseGradients(WithBags(), {0, 2, 1, 2, 0, 1});
}

TEST(EmbeddingModelTest, DlrmAndWideDeepGradientsMatchFiniteDifferences) {
  {
    SCOPED_TRACE("dlrm");
    CheckRowAndDenseGradients(SmallDlrm(), {0, 1, 1, 0, 1});
  }
  {
    SCOPED_TRACE("wide & deep");
    CheckRowAndDenseGradients(SmallWideDeep(), {1, 0, 1, 0, 0});
  }
}

// The float model on the CPU backend follows the double reference: the same loss and row
// gradients up to float rounding.
TEST(EmbeddingModelTest, FloatCpuModelMatchesTheDoubleReference) {
  constexpr int kBatch = 8;
  for (const auto& [name, builder] :
       {std::pair{"two tables", TwoTables()}, std::pair{"dlrm", SmallDlrm()},
        std::pair{"wide & deep", SmallWideDeep()}, std::pair{"bags", WithBags()}}) {
    SCOPED_TRACE(name);
    kernels::ReferenceBackend<double> ref_backend;
    ASSERT_OK_AND_ASSIGN(auto cpu_backend, kernels::CpuBackend::Create({}));
    kernels::CpuBackend& cpu = *cpu_backend;
    ASSERT_OK_AND_ASSIGN(auto ref, BuildModel<double>(builder, &ref_backend, 4));
    ASSERT_OK_AND_ASSIGN(auto fast, BuildModel<float>(builder, &cpu, 4));
    std::mt19937 rng(9), same(9);
    TableInputs<double> ref_tables(*ref, kBatch, rng);
    TableInputs<float> fast_tables(*fast, kBatch, same);
    ref_tables.SetInto(*ref);
    fast_tables.SetInto(*fast);
    std::vector<double> x(kBatch * 3);
    for (double& v : x) v = std::uniform_real_distribution<double>(-1, 1)(rng);
    const std::vector<float> xf(x.begin(), x.end());
    std::vector<int32_t> labels(kBatch);
    for (int b = 0; b < kBatch; ++b) labels[b] = b % ref->num_classes();
    ASSERT_OK_AND_ASSIGN(const StepResult a, ref->TrainStep(x.data(), labels.data(), kBatch));
    ASSERT_OK_AND_ASSIGN(const StepResult b, fast->TrainStep(xf.data(), labels.data(), kBatch));
    EXPECT_NEAR(a.loss, b.loss, 1e-5);
    for (int t = 0; t < ref->num_tables(); ++t) {
      const auto& g = ref->table_gradient(t);
      const auto& gf = fast->table_gradient(t);
      ASSERT_EQ(g.size(), gf.size());
      double largest = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        EXPECT_NEAR(g[i], gf[i], 1e-5) << t << " " << i;
        largest = std::max(largest, std::abs(g[i]));
      }
      EXPECT_GT(largest, 1e-4) << "table " << t;
    }
    for (int v = 0; v < ref->num_variables(); ++v) {
      for (size_t i = 0; i < ref->gradient(v).size(); ++i) {
        EXPECT_NEAR(ref->gradient(v)[i], fast->gradient(v)[i], 1e-5) << v << " " << i;
      }
    }
  }
}

TEST(EmbeddingModelTest, TablesFollowTheDenseVariablesAndCountInTheSignature) {
  ASSERT_OK_AND_ASSIGN(auto cpu_backend, kernels::CpuBackend::Create({}));
  kernels::CpuBackend& cpu = *cpu_backend;
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(TwoTables(), &cpu, 1));
  EXPECT_EQ(model->num_variables(), 4);  // fc1 and logits, kernel and bias
  ASSERT_EQ(model->variables().size(), 6u);
  EXPECT_EQ(model->num_tables(), 2);
  EXPECT_EQ(model->table_variable(1), 5);
  EXPECT_EQ(model->variables()[4].name, "user");
  EXPECT_TRUE(model->variables()[4].is_table());
  EXPECT_EQ(model->variables()[4].shape, (Shape{100, 4}));
  EXPECT_EQ(model->categorical_fields(), 5);
  EXPECT_EQ(model->table_field_offset(1), 2);
  EXPECT_EQ(model->input_shape(), (Shape{3}));
  ModelBuilder b({3});
  b.Embedding("user", 2, {.rows = 100, .dim = 4, .init_scale = 0.5f})
      .Embedding("item", 3, {.rows = 0, .dim = 2, .init_scale = 0.1f})
      .Dense("fc1", 5)
      .Tanh()
      .Dense("logits", 3, Init::kGlorot);
  ASSERT_OK_AND_ASSIGN(auto other, BuildModel<float>(b, &cpu, 1));
  EXPECT_NE(other->signature(), model->signature());
  // A step without the tables' rows is refused, naming the table.
  const std::vector<float> x(3, 0.5f);
  const int32_t label = 1;
  Result<StepResult> r = model->TrainStep(x.data(), &label, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("embedding table user"), std::string::npos);
}

TEST(EmbeddingModelTest, BuilderChecksNameTheTable) {
  ASSERT_OK_AND_ASSIGN(auto cpu_backend, kernels::CpuBackend::Create({}));
  kernels::CpuBackend& cpu = *cpu_backend;
  auto build = [&](EmbeddingSpec spec, Shape input = {3}) {
    ModelBuilder b(input);
    b.Embedding(spec.name, spec.fields, spec.options).Dense("logits", 2);
    return BuildModel<float>(b, &cpu, 1).status();
  };
  EXPECT_NE(build({"t", 0, {}}).message().find("embedding table 't': fields 0"), std::string::npos);
  EXPECT_NE(build({"t", 1, {.dim = 0}}).message().find("embedding table 't'"), std::string::npos);
  EXPECT_NE(build({"t", 1, {.rows = -3}}).message().find("table t"), std::string::npos);
  EXPECT_NE(build({"logits", 1, {}}).message().find("used twice"), std::string::npos);
  EXPECT_NE(build({"t", 1, {}}, {1, 2, 2}).message().find("vector [features]"), std::string::npos);
  // A table that looks up another's ids takes none of its own, and must follow that table.
  ModelBuilder shared({3});
  shared.Embedding("deep", 4, {.dim = 2}).EmbeddingOf("wide", "deep", {.dim = 1});
  shared.Dense("logits", 2);
  EXPECT_EQ(shared.categorical_fields(), 4);
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(shared, &cpu, 1));
  EXPECT_EQ(model->categorical_fields(), 4);
  EXPECT_EQ(model->table_field_offset(1), 0);
  EXPECT_EQ(model->table(1).fields, 4);
  EXPECT_EQ(model->layers()[0]->input_shape(), Shape{4 * 2 + 4 * 1 + 3});
  ModelBuilder early({3});
  early.EmbeddingOf("wide", "deep", {.dim = 1}).Embedding("deep", 4, {.dim = 2});
  early.Dense("logits", 2);
  EXPECT_NE(BuildModel<float>(early, &cpu, 1)
                .status()
                .message()
                .find("takes the ids of 'deep', which is not a table with one-hot ids of its own "
                      "declared before it"),
            std::string::npos);
  // Multi-hot fields are counted apart, and no EmbeddingOf shares one.
  ModelBuilder bags({3});
  bags.Embedding("user", 2, {.dim = 2}).EmbeddingBag("watched", BagPooling::kMean, {.dim = 3});
  bags.EmbeddingBag("liked", BagPooling::kSum, {.dim = 1}).Dense("logits", 2);
  EXPECT_EQ(bags.categorical_fields(), 2);
  EXPECT_EQ(bags.multi_hot_fields(), 2);
  ASSERT_OK_AND_ASSIGN(auto with_bags, BuildModel<float>(bags, &cpu, 1));
  EXPECT_EQ(with_bags->table_bag(0), -1);
  EXPECT_EQ(with_bags->table_bag(2), 1);
  EXPECT_EQ(with_bags->layers()[0]->input_shape(), Shape{2 * 2 + 3 + 1 + 3});
  bags.EmbeddingOf("wide", "watched", {.dim = 1});
  EXPECT_NE(BuildModel<float>(bags, &cpu, 1).status().message().find("does not share a multi-hot"),
            std::string::npos);
}

}  // namespace
}  // namespace towerps::worker
