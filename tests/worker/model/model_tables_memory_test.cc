// Embedding tables on a backend whose memory is not host memory: the checking stand-in must give
// the CPU's bits (rows, indices, bags and uses copied to the device, the input assembled there,
// the rows' gradients brought back), and a GPU, when there is one, the CPU's results within
// float32 tolerances. Split from model_backend_memory_test.cc, whose fixtures it shares
// (device_model_testing.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/checked_device_backend.h"
#include "tests/worker/model/device_model_testing.h"
#include "worker/model/model_factory.h"
#include "worker/model/zoo.h"

namespace towerps::worker {
namespace {

using testing::InputBatch;
using testing::RandomBatch;
using testing::WhyNoCuda;
#ifdef TOWERPS_WITH_CUDA
using testing::GrowingGpuBackend;
#endif

// DLRM's structure at a toy size: tables (one sharing another's ids, one pooling a multi-hot
// field), a bottom MLP, the dot interaction, a top MLP and one logit.
ModelBuilder TablesModel() {
  ModelBuilder b({3});
  b.Embedding("a", 2, {.rows = 0, .dim = 4, .init_scale = 0.5f})
      .Embedding("b", 1, {.rows = 0, .dim = 4, .init_scale = 0.5f})
      .EmbeddingOf("c", "a", {.rows = 0, .dim = 4, .init_scale = 0.5f})
      .EmbeddingBag("d", BagPooling::kMean, {.rows = 0, .dim = 4, .init_scale = 0.5f});
  b.Join("interaction", JoinKind::kDotInteraction,
         {{{"dense"}, [](ModelBuilder& m) { m.Dense("bottom", 4).Relu(); }},
          {{"a", "b", "c", "d"}, {}}});
  b.Dense("top", 5).Relu().Dense("logit", 1, Init::kGlorot);
  b.Loss(LossKind::kSigmoidCrossEntropy);
  return b;
}

// A batch's rows for each table: `unique` rows, and per example and field which one (repeats).
// A multi-hot field's examples use 0 to 3 rows each, and its offsets start at 3, as a tower's
// slice of a larger batch does (the index then starts at that slice's first use).
struct TableRows {
  static constexpr uint32_t kBase = 3;
  std::vector<std::vector<float>> rows;
  std::vector<std::vector<uint32_t>> index, bags;
  TableRows(const Model<float>& m, int batch, int64_t unique, uint32_t seed) {
    std::mt19937 rng(seed);
    for (int t = 0; t < m.num_tables(); ++t) {
      rows.emplace_back(static_cast<size_t>(unique * m.table(t).options.dim));
      for (float& v : rows.back()) v = std::uniform_real_distribution<float>(-1, 1)(rng);
      bags.emplace_back();
      size_t uses = static_cast<size_t>(batch * m.table(t).fields);
      if (m.table_bag(t) >= 0) {
        bags.back().push_back(kBase);
        for (int b = 0; b < batch; ++b) {
          bags.back().push_back(bags.back().back() +
                                std::uniform_int_distribution<uint32_t>(0, 3)(rng));
        }
        uses = bags.back().back() - kBase;
      }
      index.emplace_back(uses);
      for (uint32_t& i : index.back()) {
        i = std::uniform_int_distribution<uint32_t>(0, static_cast<uint32_t>(unique - 1))(rng);
      }
    }
  }
  void SetInto(Model<float>& m, int64_t unique) {
    for (int t = 0; t < m.num_tables(); ++t) {
      m.SetTableRows(t, rows[t].data(), unique, index[t].data(),
                     bags[t].empty() ? nullptr : bags[t].data());
    }
  }
};

// The tables' rows go to the device, the input is assembled there, and the rows' gradient comes
// back: the same bits as on the CPU, with every op on device memory.
TEST(ModelBackendMemoryTest, DeviceTablesAreBitwiseTheCpuTables) {
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  CheckedDeviceBackend dev;
  ASSERT_OK_AND_ASSIGN(auto host_model, BuildModel<float>(TablesModel(), cpu.get(), 7));
  ASSERT_OK_AND_ASSIGN(auto dev_model, BuildModel<float>(TablesModel(), &dev, 7));
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(step);
    const InputBatch b = RandomBatch(*host_model, 6, 300 + step);
    TableRows rows(*host_model, 6, 5, 400 + step);
    rows.SetInto(*host_model, 5);
    rows.SetInto(*dev_model, 5);
    ASSERT_OK_AND_ASSIGN(const StepResult h, host_model->TrainStep(b.x.data(), b.labels.data(), 6));
    ASSERT_OK_AND_ASSIGN(const StepResult d, dev_model->TrainStep(b.x.data(), b.labels.data(), 6));
    EXPECT_EQ(d.loss, h.loss);
    for (int t = 0; t < host_model->num_tables(); ++t) {
      const std::vector<float>& want = host_model->table_gradient(t);
      EXPECT_EQ(dev_model->table_gradient(t), want) << host_model->table(t).name;
      EXPECT_TRUE(std::any_of(want.begin(), want.end(), [](float g) { return g != 0.0f; }));
    }
    for (int v = 0; v < host_model->num_variables(); ++v) {
      const auto want = host_model->gradient(v);
      const auto got = dev_model->gradient(v);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin(), got.end()))
          << host_model->variables()[v].name;
    }
    ASSERT_OK_AND_ASSIGN(const StepResult he, host_model->Evaluate(b.x.data(), b.labels.data(), 6));
    ASSERT_OK_AND_ASSIGN(const StepResult de, dev_model->Evaluate(b.x.data(), b.labels.data(), 6));
    EXPECT_EQ(de.probabilities, he.probabilities);
  }
  EXPECT_EQ(dev.violations, 0) << "first op given a pointer outside backend memory: "
                               << dev.first_violation;
}

// dlrm_small on a GPU against the CPU: loss, dense gradients and the tables' row gradients.
TEST(ModelBackendMemoryTest, CudaTablesMatchTheCpuTables) {
  if (const std::string why = WhyNoCuda(); !why.empty()) GTEST_SKIP() << why;
#ifdef TOWERPS_WITH_CUDA
  auto gpu = GrowingGpuBackend();
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(const ModelBuilder builder, ZooModel("dlrm_small"));
  ASSERT_OK_AND_ASSIGN(auto host_model, BuildModel<float>(builder, cpu.get(), 11));
  ASSERT_OK_AND_ASSIGN(auto gpu_model, BuildModel<float>(builder, gpu->get(), 11));
  const InputBatch b = RandomBatch(*host_model, 64, 21);
  TableRows rows(*host_model, 64, 40, 22);
  rows.SetInto(*host_model, 40);
  rows.SetInto(*gpu_model, 40);
  ASSERT_OK_AND_ASSIGN(const StepResult h, host_model->TrainStep(b.x.data(), b.labels.data(), 64));
  ASSERT_OK_AND_ASSIGN(const StepResult g, gpu_model->TrainStep(b.x.data(), b.labels.data(), 64));
  EXPECT_NEAR(g.loss, h.loss, 1e-4 * std::max(1.0, std::abs(h.loss)));
  for (int t = 0; t < host_model->num_tables(); ++t) {
    const std::vector<float>& want = host_model->table_gradient(t);
    const std::vector<float>& got = gpu_model->table_gradient(t);
    ASSERT_EQ(got.size(), want.size());
    float largest = 0;
    for (float v : want) largest = std::max(largest, std::abs(v));
    ASSERT_GT(largest, 0.0f) << host_model->table(t).name;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(got[i], want[i], 1e-3f * largest) << host_model->table(t).name << " " << i;
    }
  }
#endif
}

}  // namespace
}  // namespace towerps::worker
