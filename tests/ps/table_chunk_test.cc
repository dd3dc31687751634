// TableChunk (ps/server/table_chunk.h): a table partition's rows under every update rule. Lazy rows
// with initial values from (seed, table, id), bounded tables, sync's rank-ordered sum and its
// bit-identical reruns, N workers at batch B against one at N*B, the previous version for a
// restarted worker, row staleness, refusals and checkpoints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/ps/table_test_util.h"

namespace towerps::ps {
namespace {

using testing::Ids;
using testing::MakeTable;
using testing::RandomRows;
using testing::Read;
using testing::RowsOf;
using testing::TableJob;

TEST(TableChunkTest, RowsAreCreatedWhenFirstUpdatedWithValuesFromSeedTableAndId) {
  const JobConfig job = TableJob(UpdateMode::kAsync, 2, TableOptimizerKind::kSgd);
  auto a = MakeTable(job, 8);
  const std::vector<uint64_t> ids = {3, 0, 1ull << 40, ~0ull, 77};
  const std::vector<float> first = Read(*a, ids);
  EXPECT_EQ(a->rows_held(), 0) << "a pull must not create rows";
  ASSERT_EQ(first.size(), ids.size() * 8);
  for (float v : first) {
    EXPECT_GE(v, -0.5f);
    EXPECT_LT(v, 0.5f);
  }
  EXPECT_NE(std::vector<float>(first.begin(), first.begin() + 8),
            std::vector<float>(first.begin() + 8, first.begin() + 16));
  // Another partition object of the same job and table draws the same bits, in any order.
  auto b = MakeTable(job, 8);
  std::vector<uint64_t> reversed(ids.rbegin(), ids.rend());
  std::vector<float> again = Read(*b, reversed);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(&first[i * 8], &again[(ids.size() - 1 - i) * 8], 32)) << ids[i];
  }
  // Another table name or seed draws others.
  EXPECT_NE(Read(*MakeTable(job, 8, 0, "other"), ids), first);
  JobConfig seeded = job;
  seeded.seed = 2;
  EXPECT_NE(Read(*MakeTable(seeded, 8), ids), first);

  // Worker 1 updates id 77 with a zero gradient at some later version: the row is created with
  // the values a pull read before, whoever touches it first and whenever.
  ShardCounters counters;
  ASSERT_TRUE(b->Push(RowsOf(0, 0, 0, {3}, RandomRows(1, 8, 1)), &counters).ok());
  Tensor zero = Tensor::Zeros({1, 8});
  ASSERT_TRUE(b->Push(RowsOf(1, 1, 0, {77}, zero), &counters).ok());
  EXPECT_EQ(b->rows_held(), 2);
  EXPECT_EQ(b->table_counters()->rows.load(), 2u);
  EXPECT_EQ(Read(*b, {77}), std::vector<float>(first.end() - 8, first.end()));
}

TEST(TableChunkTest, BoundedTableRefusesAnIdOutOfRangeNamingTableIdAndBound) {
  const JobConfig job = TableJob(UpdateMode::kSync, 1, TableOptimizerKind::kSgd);
  auto t = MakeTable(job, 4, /*rows=*/1000, "user");
  EXPECT_TRUE(t->CheckIds(Ids({0, 999}), false).ok());
  Status bad = t->CheckIds(Ids({5, 1000}), false);
  ASSERT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("table user has 1000 rows: id 1000"), std::string::npos)
      << bad.ToString();
  ShardCounters counters;
  Result<PushOutcome> push = t->Push(RowsOf(0, 0, 0, {1, 4000}, RandomRows(2, 4, 1)), &counters);
  ASSERT_FALSE(push.ok());
  EXPECT_NE(push.status().message().find("id 4000"), std::string::npos);
  EXPECT_EQ(t->version(), 0);
  EXPECT_EQ(t->rows_held(), 0) << "a refused push changes nothing";
}

TEST(TableChunkTest, MalformedPushesAreRefusedNamingTheTable) {
  const JobConfig job = TableJob(UpdateMode::kAsync, 2, TableOptimizerKind::kSgd);
  auto t = MakeTable(job, 4);
  ShardCounters counters;
  auto refused = [&](Contribution c, const std::string& why) {
    Result<PushOutcome> r = t->Push(std::move(c), &counters);
    ASSERT_FALSE(r.ok()) << why;
    EXPECT_NE(r.status().message().find("table emb"), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(why), std::string::npos) << r.status().ToString();
  };
  refused(RowsOf(0, 0, 0, {5, 2}, RandomRows(2, 4, 1)), "unique and increasing");
  refused(RowsOf(0, 0, 0, {2, 2}, RandomRows(2, 4, 1)), "unique and increasing");
  refused(RowsOf(0, 0, 0, {2, 5}, RandomRows(2, 3, 1)), "[2, 4]");
  Contribution counts = RowsOf(0, 0, 0, {2, 5}, RandomRows(2, 4, 1));
  counts.pulled_updates = Tensor::Zeros({3}, DType::kUInt32);
  refused(std::move(counts), "update counts");
  Contribution ids = RowsOf(0, 0, 0, {2, 5}, RandomRows(2, 4, 1));
  ids.ids = Tensor::Zeros({2});
  refused(std::move(ids), "uint64");
  // A peer's version and clock are read as they come (the message fuzzer's finding: version
  // INT64_MIN overflowed the staleness); the rule refuses what is out of range, naming it.
  refused(RowsOf(0, INT64_MIN, 0, {2, 5}, RandomRows(2, 4, 1)), "version -9223372036854775808");
  refused(RowsOf(0, 0, INT64_MAX, {2, 5}, RandomRows(2, 4, 1)), "clock 9223372036854775807");
  refused(RowsOf(2, 0, 0, {2, 5}, RandomRows(2, 4, 1)), "worker rank 2, outside 0..1");
  EXPECT_EQ(t->version(), 0);
  EXPECT_EQ(counters.gradients_received.load(), 0u);

  // A partition refuses ids another one holds.
  JobConfig two = job;
  two.servers = 2;
  const VariableSpec var = TableVariable("emb", 0, 4, 0.5f);
  Result<ChunkPlacement> p = ChunkPlacement::Compute({var}, 2, two.partition_bytes);
  TableChunk part0(p->chunks()[0], var, two);
  uint64_t other = 0;
  while (TablePartitionOf(other, 2) == 0) ++other;
  Status s = part0.CheckIds(Ids({other}), false);
  EXPECT_NE(s.message().find("belongs to partition 1"), std::string::npos) << s.ToString();
}

TEST(TableChunkTest, SyncUpdateIsTheRankOrderedSumOverAllWorkers) {
  const JobConfig job = TableJob(UpdateMode::kSync, 3, TableOptimizerKind::kSgd);
  auto t = MakeTable(job, 2);
  const std::vector<float> before = Read(*t, {1, 2, 3});
  const Tensor g0 = RandomRows(2, 2, 10), g2 = RandomRows(2, 2, 12);
  ShardCounters counters;
  // Worker 1 touched nothing: it pushes no rows, and still counts in the divisor.
  ASSERT_EQ(t->Push(RowsOf(2, 0, 0, {2, 3}, g2), &counters)->kind, PushOutcome::Kind::kPending);
  ASSERT_EQ(t->Push(RowsOf(1, 0, 0, {}, Tensor::Empty({0, 2})), &counters)->kind,
            PushOutcome::Kind::kPending);
  ASSERT_EQ(t->Push(RowsOf(0, 0, 0, {1, 2}, g0), &counters)->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(t->version(), 1);
  const float lr = job.table_optimizer.learning_rate, third = 1.0f / 3.0f;
  std::vector<float> sum = {g0.f32()[0],
                            g0.f32()[1],  // id 1
                            g0.f32()[2] + g2.f32()[0],
                            g0.f32()[3] + g2.f32()[1],  // id 2
                            g2.f32()[2],
                            g2.f32()[3]};  // id 3
  const std::vector<float> after = Read(*t, {1, 2, 3});
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i], before[i] - lr * (sum[i] * third)) << i;
  }
  EXPECT_EQ(t->rows_held(), 3);
  EXPECT_EQ(counters.row_staleness[0].load(), 4u);  // sync: every row at staleness 0
}

// Seven workers whose ids overlap, pushing in a shuffled order: each row's gradients are summed in
// rank order, ((g0 + g1) + g2) + ..., as the partition merges the workers' sorted ids (pairs of
// runs, an odd one left over). Id 1's gradients cancel as they do only in some orders: 1e8 + 1
// rounds to 1e8, so the rank-ordered sum is 2.25, and the reverse order gives 0.
TEST(TableChunkTest, ManyWorkersGradientsAreSummedInRankOrder) {
  constexpr int kWorkers = 7;
  const JobConfig job = TableJob(UpdateMode::kSync, kWorkers, TableOptimizerKind::kSgd);
  auto t = MakeTable(job, 1);
  const std::vector<float> before = Read(*t, {1, 5, 9});
  const float id1[kWorkers] = {1e8f, 1.0f, -1e8f, 3.0f, 0.25f, -2.0f, 1.0f};
  // Workers 0, 3, 6 push ids {1, 5, 9}; the others {1, 9}.
  auto ids_of = [](int w) {
    return w % 3 == 0 ? std::vector<uint64_t>{1, 5, 9} : std::vector<uint64_t>{1, 9};
  };
  std::vector<Tensor> grads;
  for (int w = 0; w < kWorkers; ++w) {
    const auto n = static_cast<int64_t>(ids_of(w).size());
    grads.push_back(RandomRows(n, 1, static_cast<uint32_t>(40 + w)));
    grads.back().f32()[0] = id1[w];
  }
  std::vector<int> order(kWorkers);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  ShardCounters counters;
  for (int w : order) {
    ASSERT_TRUE(t->Push(RowsOf(w, 0, 0, ids_of(w), grads[static_cast<size_t>(w)]), &counters).ok());
  }
  ASSERT_EQ(t->version(), 1);
  float sum[3] = {0, 0, 0};  // ids 1, 5, 9, each in rank order
  for (int w = 0; w < kWorkers; ++w) {
    const float* g = grads[static_cast<size_t>(w)].f32();
    sum[0] += g[0];
    if (w % 3 == 0) sum[1] += g[1];
    sum[2] += g[ids_of(w).size() - 1];
  }
  ASSERT_EQ(sum[0], 2.25f);
  const float lr = job.table_optimizer.learning_rate, scale = 1.0f / kWorkers;
  const std::vector<float> after = Read(*t, {1, 5, 9});
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(after[i], before[i] - lr * (sum[i] * scale)) << i;
  EXPECT_EQ(counters.row_staleness[0].load(), 17u);  // every gradient's row at staleness 0
}

// Five sync steps of three workers whose pushes arrive in a different order each run: the
// partition holds the same bits.
TEST(TableChunkTest, SyncRerunsAreBitIdenticalWhateverOrderPushesArrive) {
  const JobConfig job = TableJob(UpdateMode::kSync, 3, TableOptimizerKind::kAdam);
  std::vector<TableState> runs;
  for (uint32_t run = 0; run < 3; ++run) {
    auto t = MakeTable(job, 5);
    ShardCounters counters;
    std::mt19937 order_rng(run);
    for (int64_t step = 0; step < 5; ++step) {
      std::vector<int> order = {0, 1, 2};
      std::shuffle(order.begin(), order.end(), order_rng);
      for (int w : order) {
        std::vector<uint64_t> ids;
        for (uint64_t id = static_cast<uint64_t>(w); id < 40; id += 2 + step) ids.push_back(id);
        const auto n = static_cast<int64_t>(ids.size());
        const auto seed = static_cast<uint32_t>(100 * step + w);
        ASSERT_TRUE(t->Push(RowsOf(w, step, step, ids, RandomRows(n, 5, seed)), &counters).ok());
      }
    }
    ASSERT_EQ(t->version(), 5);
    runs.push_back(t->Snapshot());
  }
  for (size_t r = 1; r < runs.size(); ++r) {
    ASSERT_EQ(runs[r].ids.num_elements(), runs[0].ids.num_elements());
    EXPECT_EQ(
        0, std::memcmp(runs[r].rows.raw_data(), runs[0].rows.raw_data(), runs[0].rows.byte_size()));
    EXPECT_EQ(0,
              std::memcmp(runs[r].ids.raw_data(), runs[0].ids.raw_data(), runs[0].ids.byte_size()));
  }
}

// Per-example gradients of a batch whose ids repeat: N workers each averaging a B-example slice
// (repeats summed first, as a worker does) against one worker averaging all N*B.
TEST(TableChunkTest, NWorkersAtBatchBEqualOneWorkerAtNTimesB) {
  constexpr int kWorkers = 4, kBatch = 16, kDim = 3;
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint64_t> pick(0, 20);  // few ids: many repeats
  std::vector<uint64_t> ids(kWorkers * kBatch);
  for (auto& id : ids) id = pick(rng);
  const Tensor per_example = RandomRows(kWorkers * kBatch, kDim, 3);
  // The gradient of one worker's mean loss over examples [begin, end): summed by id, / count.
  auto average = [&](int begin, int end, float count) {
    UniqueIds u = Deduplicate({ids.data() + begin, static_cast<size_t>(end - begin)}, 1);
    Tensor g = Tensor::Empty({u.size(), kDim});
    SumRowsById(u, per_example.f32() + begin * kDim, kDim, g.f32());
    for (int64_t i = 0; i < g.num_elements(); ++i) g.f32()[i] /= count;
    std::vector<uint64_t> unique(u.ids.u64(), u.ids.u64() + u.size());
    return RowsOf(0, 0, 0, unique, g);
  };
  for (TableOptimizerKind kind : {TableOptimizerKind::kSgd, TableOptimizerKind::kAdagrad}) {
    auto many = MakeTable(TableJob(UpdateMode::kSync, kWorkers, kind), kDim);
    auto one = MakeTable(TableJob(UpdateMode::kSync, 1, kind), kDim);
    ShardCounters counters;
    for (int w = 0; w < kWorkers; ++w) {
      Contribution c = average(w * kBatch, (w + 1) * kBatch, kBatch);
      c.worker = w;
      ASSERT_TRUE(many->Push(std::move(c), &counters).ok());
    }
    ASSERT_TRUE(one->Push(average(0, kWorkers * kBatch, kWorkers * kBatch), &counters).ok());
    std::vector<uint64_t> all(21);
    std::iota(all.begin(), all.end(), 0);
    const std::vector<float> a = Read(*many, all), b = Read(*one, all);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6f * (1 + std::fabs(b[i])));
    EXPECT_EQ(many->rows_held(), one->rows_held());
  }
}

TEST(TableChunkTest, ExactPullReadsTheVersionBeforeTheLastUpdate) {
  const JobConfig job = TableJob(UpdateMode::kSync, 1, TableOptimizerKind::kMomentum);
  auto t = MakeTable(job, 2);
  ShardCounters counters;
  ASSERT_TRUE(t->Push(RowsOf(0, 0, 0, {4, 9}, RandomRows(2, 2, 1)), &counters).ok());
  const std::vector<float> at1 = Read(*t, {4, 9, 12});
  ASSERT_TRUE(t->Push(RowsOf(0, 1, 1, {9, 12}, RandomRows(2, 2, 2)), &counters).ok());
  Tensor rows, updates;
  ASSERT_TRUE(t->Lookup(Ids({4, 9, 12}), 1, &rows, &updates).ok());
  EXPECT_EQ(std::vector<float>(rows.f32(), rows.f32() + 6), at1);
  EXPECT_EQ(updates.u32()[0], 1u);  // id 4: one update, at version 1 too
  EXPECT_EQ(updates.u32()[1], 1u);  // id 9: two now, one at version 1
  EXPECT_EQ(updates.u32()[2], 0u);  // id 12: created by the second update
  EXPECT_NE(Read(*t, {9}), std::vector<float>(at1.begin() + 2, at1.begin() + 4));
  Status gone = t->Lookup(Ids({4}), 0, &rows, &updates);
  EXPECT_EQ(gone.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(gone.message().find("no longer held"), std::string::npos);
}

// Async: worker 0 pulls row 7, worker 1 updates it twice, then worker 0 pushes: the row saw two
// updates between worker 0's pull and its push.
TEST(TableChunkTest, RowStalenessCountsTheRowsUpdatesBetweenPullAndPush) {
  const JobConfig job = TableJob(UpdateMode::kAsync, 2, TableOptimizerKind::kSgd);
  auto t = MakeTable(job, 2);
  ShardCounters counters;
  Tensor rows, updates;
  ASSERT_TRUE(t->Lookup(Ids({7, 8}), 0, &rows, &updates).ok());
  const uint32_t pulled = updates.u32()[0];
  ASSERT_TRUE(t->Push(RowsOf(1, 0, 0, {7}, RandomRows(1, 2, 1)), &counters).ok());
  ASSERT_TRUE(t->Push(RowsOf(1, 1, 1, {7}, RandomRows(1, 2, 2), /*pulled=*/1), &counters).ok());
  Result<PushOutcome> late =
      t->Push(RowsOf(0, 0, 0, {7, 8}, RandomRows(2, 2, 3), pulled), &counters);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->staleness, 2);                    // the partition's, as a chunk's
  EXPECT_EQ(counters.row_staleness[0].load(), 3u);  // worker 1's two rows, and row 8
  EXPECT_EQ(counters.row_staleness[2].load(), 1u);  // row 7 of worker 0
}

TEST(TableChunkTest, NonFiniteGradientIsRefusedAndChangesNoRow) {
  const JobConfig job = TableJob(UpdateMode::kAsync, 1, TableOptimizerKind::kAdagrad);
  auto t = MakeTable(job, 2);
  ShardCounters counters;
  Tensor g = RandomRows(2, 2, 1);
  g.f32()[3] = std::nanf("");
  const std::vector<float> before = Read(*t, {1, 2});
  Result<PushOutcome> r = t->Push(RowsOf(0, 0, 0, {1, 2}, g), &counters);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, PushOutcome::Kind::kRejected);
  EXPECT_NE(r->rejection.find("table emb partition 0"), std::string::npos) << r->rejection;
  EXPECT_EQ(counters.nonfinite_rejected.load(), 1u);
  EXPECT_EQ(Read(*t, {1, 2}), before);
  EXPECT_EQ(t->rows_held(), 0);
  EXPECT_EQ(t->version(), 1);  // counted, so that nobody waits for it
}

// A partition restored from another's snapshot continues with it bit for bit.
TEST(TableChunkTest, SnapshotAndRestoreContinueBitForBit) {
  for (TableOptimizerKind kind : {TableOptimizerKind::kAdam, TableOptimizerKind::kFtrl}) {
    const JobConfig job = TableJob(UpdateMode::kAsync, 2, kind);
    auto a = MakeTable(job, 4);
    ShardCounters counters;
    auto step = [&](TableChunk& t, int i) {
      std::vector<uint64_t> ids = {static_cast<uint64_t>(i % 3), 5, 100 + static_cast<uint64_t>(i)};
      std::sort(ids.begin(), ids.end());
      ASSERT_TRUE(
          t.Push(RowsOf(i % 2, t.version(), i / 2, ids, RandomRows(3, 4, static_cast<uint32_t>(i))),
                 &counters)
              .ok());
    };
    for (int i = 0; i < 6; ++i) step(*a, i);
    auto b = MakeTable(job, 4);
    ASSERT_TRUE(b->Restore(a->Snapshot()).ok());
    EXPECT_EQ(b->version(), a->version());
    EXPECT_EQ(b->worker_clock(1), a->worker_clock(1));
    for (int i = 6; i < 12; ++i) {
      step(*a, i);
      step(*b, i);
    }
    const TableState sa = a->Snapshot(), sb = b->Snapshot();
    ASSERT_EQ(sa.rows.byte_size(), sb.rows.byte_size());
    EXPECT_EQ(0, std::memcmp(sa.rows.raw_data(), sb.rows.raw_data(), sa.rows.byte_size()));
    EXPECT_EQ(0, std::memcmp(sa.row_updates.raw_data(), sb.row_updates.raw_data(),
                             sa.row_updates.byte_size()));
  }
  // A state of another shape, or with an id twice, is refused whole.
  const JobConfig job = TableJob(UpdateMode::kAsync, 2, TableOptimizerKind::kSgd);
  auto t = MakeTable(job, 4);
  TableState bad = MakeTable(job, 3)->Snapshot();
  EXPECT_EQ(t->Restore(bad).code(), StatusCode::kCorruption);
  TableState twice = t->Snapshot();
  twice.ids = Ids({1, 1});
  twice.rows = Tensor::Zeros({2, 4});
  twice.row_updates = Tensor::Zeros({2}, DType::kUInt32);
  twice.row_last_update = Tensor::Zeros({2}, DType::kUInt64);
  Status s = t->Restore(twice);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("id 1 twice"), std::string::npos) << s.ToString();
  EXPECT_EQ(t->rows_held(), 0);
}

}  // namespace
}  // namespace towerps::ps
