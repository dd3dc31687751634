// The per-row optimizers (ps/server/row_optimizer.h), through a table partition
// (ps/server/table_chunk.h), against references written here in double: a few rows over a few
// updates, each row touched on some of them only, so that laziness shows (a row no gradient touched
// keeps its values and state; lazy Adam's bias correction counts the row's own updates).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "ps/server/row_optimizer.h"
#include "tests/ps/table_test_util.h"

namespace towerps::ps {
namespace {

using testing::MakeTable;
using testing::RandomRows;
using testing::Read;
using testing::RowsOf;
using testing::TableJob;

constexpr int64_t kDim = 3;

// One row's reference state, in double.
struct RefRow {
  std::vector<double> w, s0, s1;
  int64_t t = 0;
};

void RefUpdate(const JobConfig& job, RefRow& r, const float* g_in, double lr) {
  const OptimizerOptions& o = job.optimizer;
  const TableOptimizerOptions& f = job.table_optimizer;
  ++r.t;
  for (int64_t i = 0; i < kDim; ++i) {
    const double g = g_in[i] + o.weight_decay * r.w[i];
    switch (f.kind) {
      case TableOptimizerKind::kSgd:
        r.w[i] -= lr * g;
        break;
      case TableOptimizerKind::kMomentum:
        r.s0[i] = o.momentum * r.s0[i] + g;
        r.w[i] -= lr * r.s0[i];
        break;
      case TableOptimizerKind::kAdagrad:
        r.s0[i] += g * g;
        r.w[i] -= lr * g / std::sqrt(r.s0[i]);
        break;
      case TableOptimizerKind::kAdam: {
        r.s0[i] = o.beta1 * r.s0[i] + (1 - o.beta1) * g;
        r.s1[i] = o.beta2 * r.s1[i] + (1 - o.beta2) * g * g;
        const double t = static_cast<double>(r.t);
        const double lr_t = lr * std::sqrt(1 - std::pow(o.beta2, t)) / (1 - std::pow(o.beta1, t));
        r.w[i] -= lr_t * r.s0[i] / (std::sqrt(r.s1[i]) + o.epsilon);
        break;
      }
      case TableOptimizerKind::kFtrl: {
        double& z = r.s0[i];
        double& n = r.s1[i];
        const double n_new = n + g * g;
        z += g - (std::sqrt(n_new) - std::sqrt(n)) / lr * r.w[i];
        n = n_new;
        r.w[i] = std::fabs(z) <= f.ftrl_l1 ? 0.0
                                           : -(z - std::copysign(f.ftrl_l1, z)) /
                                                 ((f.ftrl_beta + std::sqrt(n)) / lr + f.ftrl_l2);
        break;
      }
    }
  }
}

RefRow NewRefRow(const JobConfig& job, const std::vector<float>& w0) {
  RefRow r;
  r.w.assign(w0.begin(), w0.end());
  const double fill = job.table_optimizer.kind == TableOptimizerKind::kAdagrad
                          ? job.optimizer.initial_accumulator
                          : 0.0;
  r.s0.assign(kDim, fill);
  r.s1.assign(kDim, 0.0);
  if (job.table_optimizer.kind == TableOptimizerKind::kFtrl) {
    const TableOptimizerOptions& f = job.table_optimizer;
    for (int64_t i = 0; i < kDim; ++i) {
      r.s0[i] = r.w[i] == 0 ? 0.0
                            : -(r.w[i] * (f.ftrl_beta / f.learning_rate + f.ftrl_l2) +
                                std::copysign(f.ftrl_l1, r.w[i]));
    }
  }
  return r;
}

void ExpectMatchesReference(JobConfig job) {
  job.optimizer.weight_decay = 0.01f;
  auto table = MakeTable(job, kDim);
  // Which rows each update touches: 0 every time, 1 every other time, 2 once, 3 never.
  const std::vector<std::vector<uint64_t>> touched = {{0, 1, 2}, {0}, {0, 1}, {0}, {0, 1}};
  std::map<uint64_t, RefRow> ref;
  for (uint64_t id = 0; id < 4; ++id) ref[id] = NewRefRow(job, Read(*table, {id}));
  const std::vector<float> untouched = Read(*table, {3});
  ShardCounters counters;
  for (size_t step = 0; step < touched.size(); ++step) {
    const std::vector<uint64_t>& ids = touched[step];
    const Tensor g = RandomRows(static_cast<int64_t>(ids.size()), kDim, 40 + step);
    const auto v = static_cast<int64_t>(step);
    ASSERT_TRUE(table->Push(RowsOf(0, v, v, ids, g), &counters).ok());
    for (size_t k = 0; k < ids.size(); ++k) {
      RefUpdate(job, ref[ids[k]], g.f32() + k * kDim, job.table_optimizer.learning_rate);
    }
  }
  for (uint64_t id = 0; id < 3; ++id) {
    const std::vector<float> got = Read(*table, {id});
    for (int64_t i = 0; i < kDim; ++i) {
      EXPECT_NEAR(got[i], ref[id].w[i], 2e-6 * (1 + std::fabs(ref[id].w[i])))
          << kTableOptimizerKinds.Name(job.table_optimizer.kind) << " row " << id << "[" << i
          << "]";
    }
  }
  EXPECT_EQ(Read(*table, {3}), untouched);
  EXPECT_EQ(table->rows_held(), 3);
}

TEST(RowOptimizerTest, EveryOptimizerMatchesItsDoubleReferenceLazily) {
  for (auto [kind, name] : kTableOptimizerKinds.entries()) {
    SCOPED_TRACE(name);
    ExpectMatchesReference(TableJob(UpdateMode::kSync, 1, kind));
  }
}

TEST(RowOptimizerTest, FtrlWithL1AndL2MatchesItsReferenceAndZeroesWeakWeights) {
  JobConfig job = TableJob(UpdateMode::kSync, 1, TableOptimizerKind::kFtrl);
  job.table_optimizer.ftrl_l1 = 0.5f;
  job.table_optimizer.ftrl_l2 = 0.25f;
  ExpectMatchesReference(job);
  // McMahan et al.'s setting, rows starting at 0: with an L1 larger than every accumulated
  // gradient an updated weight stays exactly 0 (sparse), where without L1 it moves.
  for (float l1 : {100.0f, 0.0f}) {
    job.table_optimizer.ftrl_l1 = l1;
    auto table = MakeTable(job, kDim, 0, "wide", /*init_scale=*/0.0f);
    ShardCounters counters;
    ASSERT_TRUE(table->Push(RowsOf(0, 0, 0, {9}, RandomRows(1, kDim, 1)), &counters).ok());
    const std::vector<float> w = Read(*table, {9});
    if (l1 > 0) {
      EXPECT_EQ(w, std::vector<float>(kDim, 0.0f));
    } else {
      for (float v : w) EXPECT_NE(v, 0.0f);
    }
  }
}

TEST(RowOptimizerTest, SlotsPerRow) {
  EXPECT_EQ(RowSlots(TableOptimizerKind::kSgd), 0);
  EXPECT_EQ(RowSlots(TableOptimizerKind::kMomentum), 1);
  EXPECT_EQ(RowSlots(TableOptimizerKind::kAdagrad), 1);
  EXPECT_EQ(RowSlots(TableOptimizerKind::kAdam), 2);
  EXPECT_EQ(RowSlots(TableOptimizerKind::kFtrl), 2);
}

}  // namespace
}  // namespace towerps::ps
