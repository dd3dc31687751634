// Models with embedding tables (ModelBuilder::Embedding; worker/model/model.h): the tables'
// rows in front of the dense features, checked by finite differences in double on the
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

// A batch's tables: each table's rows for `unique` distinct ids, and per example and field the
// row it uses (repeats on purpose: the gradient of a shared row sums its uses).
template <typename T>
struct TableInputs {
  std::vector<std::vector<T>> rows;
  std::vector<std::vector<uint32_t>> inverse;
  std::vector<int64_t> unique;

  TableInputs(const Model<T>& model, int batch, std::mt19937& rng) {
    std::uniform_real_distribution<double> value(-1.0, 1.0);
    for (int t = 0; t < model.num_tables(); ++t) {
      const EmbeddingSpec& spec = model.table(t);
      unique.push_back(3);  // fewer rows than uses
      rows.emplace_back(static_cast<size_t>(3 * spec.options.dim));
      for (T& v : rows.back()) v = static_cast<T>(value(rng));
      inverse.emplace_back(static_cast<size_t>(batch * spec.fields));
      for (uint32_t& i : inverse.back()) i = std::uniform_int_distribution<uint32_t>(0, 2)(rng);
    }
  }
  void SetInto(Model<T>& model) {
    for (int t = 0; t < model.num_tables(); ++t) {
      model.SetTableRows(t, rows[t].data(), unique[t], inverse[t].data());
    }
  }
};

TEST(EmbeddingModelTest, TableRowGradientsMatchFiniteDifferences) {
  constexpr int kBatch = 4;
  kernels::ReferenceBackend<double> backend;
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<double>(TwoTables(), &backend, 3));
  std::mt19937 rng(5);
  TableInputs<double> tables(*model, kBatch, rng);
  tables.SetInto(*model);
  std::vector<double> x(kBatch * 3);
  for (double& v : x) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  const std::vector<int32_t> labels = {0, 2, 1, 2};
  ASSERT_TRUE(model->TrainStep(x.data(), labels.data(), kBatch).ok());
  const double h = 1e-6;
  for (int t = 0; t < model->num_tables(); ++t) {
    SCOPED_TRACE(model->table(t).name);
    const std::vector<double> grad = model->table_gradient(t);
    ASSERT_EQ(grad.size(), tables.rows[t].size());
    double largest = 0;
    for (size_t i = 0; i < grad.size(); ++i) {
      const double old = tables.rows[t][i];
      tables.rows[t][i] = old + h;
      ASSERT_OK_AND_ASSIGN(const StepResult plus, model->Evaluate(x.data(), labels.data(), kBatch));
      tables.rows[t][i] = old - h;
      ASSERT_OK_AND_ASSIGN(const StepResult minus,
                           model->Evaluate(x.data(), labels.data(), kBatch));
      tables.rows[t][i] = old;
      const double numeric = (plus.loss - minus.loss) / (2 * h);
      largest = std::max(largest, std::abs(numeric));
      EXPECT_NEAR(grad[i], numeric, 1e-6 + 1e-5 * std::abs(numeric)) << "element " << i;
    }
    EXPECT_GT(largest, 1e-4) << "vacuous check";
  }
  // The dense variables' gradients too: the first layer sees the rows and the features.
  ASSERT_TRUE(model->TrainStep(x.data(), labels.data(), kBatch).ok());
  const std::vector<double> fc1(model->gradient(0).begin(), model->gradient(0).end());
  auto w = model->value(0);
  for (size_t i = 0; i < w.size(); i += 7) {
    const double old = w[i];
    w[i] = old + h;
    ASSERT_OK_AND_ASSIGN(const StepResult plus, model->Evaluate(x.data(), labels.data(), kBatch));
    w[i] = old - h;
    ASSERT_OK_AND_ASSIGN(const StepResult minus, model->Evaluate(x.data(), labels.data(), kBatch));
    w[i] = old;
    EXPECT_NEAR(fc1[i], (plus.loss - minus.loss) / (2 * h), 1e-6) << "fc1/kernel " << i;
  }
}

// The float model on the CPU backend follows the double reference: the same loss and row
// gradients up to float rounding.
TEST(EmbeddingModelTest, FloatCpuModelMatchesTheDoubleReference) {
  constexpr int kBatch = 8;
  kernels::ReferenceBackend<double> ref_backend;
  ASSERT_OK_AND_ASSIGN(auto cpu_backend, kernels::CpuBackend::Create({}));
  kernels::CpuBackend& cpu = *cpu_backend;
  ASSERT_OK_AND_ASSIGN(auto ref, BuildModel<double>(TwoTables(), &ref_backend, 4));
  ASSERT_OK_AND_ASSIGN(auto fast, BuildModel<float>(TwoTables(), &cpu, 4));
  std::mt19937 rng(9), same(9);
  TableInputs<double> ref_tables(*ref, kBatch, rng);
  TableInputs<float> fast_tables(*fast, kBatch, same);
  ref_tables.SetInto(*ref);
  fast_tables.SetInto(*fast);
  std::vector<double> x(kBatch * 3);
  for (double& v : x) v = std::uniform_real_distribution<double>(-1, 1)(rng);
  const std::vector<float> xf(x.begin(), x.end());
  std::vector<int32_t> labels(kBatch);
  for (int b = 0; b < kBatch; ++b) labels[b] = b % 3;
  ASSERT_OK_AND_ASSIGN(const StepResult a, ref->TrainStep(x.data(), labels.data(), kBatch));
  ASSERT_OK_AND_ASSIGN(const StepResult b, fast->TrainStep(xf.data(), labels.data(), kBatch));
  EXPECT_NEAR(a.loss, b.loss, 1e-5);
  for (int t = 0; t < 2; ++t) {
    const auto& g = ref->table_gradient(t);
    const auto& gf = fast->table_gradient(t);
    ASSERT_EQ(g.size(), gf.size());
    for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], gf[i], 1e-5) << t << " " << i;
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
}

}  // namespace
}  // namespace towerps::worker
