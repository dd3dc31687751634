// Incremental checkpoints (ps/server/checkpoint_chain.h, ps/server/changed_ids.h): a full
// checkpoint and its deltas restore exactly what one full checkpoint taken at the last delta
// would, for a table in memory and one mostly on disk, under admission and TTL eviction; a
// partition restored from the chain continues bit for bit; each delta holds the rows changed,
// not the table; and a stale, foreign or damaged delta is never applied silently.
#include "ps/server/checkpoint_chain.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "ps/server/changed_ids.h"
#include "ps/server/tier_checkpoint.h"
#include "tests/ps/tier_test_util.h"

namespace towerps::ps {
namespace {

using testing::ExpectSameBits;
using testing::FreshDir;
using testing::MakeTiered;
using testing::OpenDisk;
using testing::RowsById;
using testing::Step;
using testing::Steps;
using testing::TierJob;

TEST(ChangedIdsTest, HoldsEachIdAddedOnceInOrderHoweverOftenItWasAdded) {
  ChangedIds changed;
  std::set<uint64_t> expected;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300000; ++i) {  // past several compactions, hot ids added again and again
    const uint64_t id = i % 3 == 0 ? rng() : rng() % 1000;
    changed.Add(id);
    expected.insert(id);
  }
  EXPECT_EQ(changed.Sorted(), std::vector<uint64_t>(expected.begin(), expected.end()));
  changed.Clear();
  EXPECT_TRUE(changed.Sorted().empty());
}

// A server's checkpoint of one table partition, as chain `chain`'s file number `delta`.
Checkpoint Of(TableState t, uint64_t chain, uint32_t delta) {
  Checkpoint ck;
  ck.meta.model_signature = 42;
  ck.meta.num_servers = 1;
  ck.meta.chain = chain;
  ck.meta.delta = delta;
  ck.tables.push_back(std::move(t));
  return ck;
}

void Write(const std::string& dir, const Checkpoint& ck) {
  const std::string path =
      ck.meta.delta == 0 ? CheckpointPath(dir, 0) : DeltaPath(dir, 0, ck.meta.delta);
  ASSERT_TRUE(SaveCheckpoint(path, ck).ok()) << path;
}

// Where the table's rows live, and whether its full checkpoint keeps the tier's checkpoint
// (ps/server/tier_checkpoint.h) rather than copying the rows on disk into the file.
enum class Rows { kMemory, kTier, kTierCheckpoint };

class CheckpointChainTest : public ::testing::TestWithParam<Rows> {};

TEST_P(CheckpointChainTest, AFullCheckpointAndItsDeltasRestoreWhatAFullOneWould) {
  const bool tiered = GetParam() != Rows::kMemory;
  const bool tier_checkpoint = GetParam() == Rows::kTierCheckpoint;
  TablePolicy policy;
  policy.admission_min_count = 2;
  policy.ttl_steps = 14;
  if (tiered) {
    policy.storage = TableStorage::kRocksdb;
    policy.memory_mb = 0.5;  // about 1,500 rows: most of the table on disk
  }
  const std::string name = std::string("chain_") + (tier_checkpoint ? "tier_checkpoint"
                                                    : tiered        ? "tiered"
                                                                    : "memory");
  auto disk_a = tiered ? OpenDisk(name + "_a") : nullptr;
  auto disk_b = tiered ? OpenDisk(name + "_b") : nullptr;
  auto a = MakeTiered(TierJob(policy), disk_a.get());
  auto b = MakeTiered(TierJob(policy), disk_b.get());
  const std::string dir = FreshDir(name);
  std::filesystem::create_directories(dir);
  const auto steps = Steps(34, 4, 1500, 20000);
  const size_t kFull = 11;  // the full checkpoint's step: most rows on disk by then
  int64_t removed = 0;
  std::set<uint64_t> touched;  // the ids pushed since the last save
  for (size_t s = 0; s < 24; ++s) {
    Step(*a, steps[s], static_cast<uint32_t>(s));
    touched.insert(steps[s].begin(), steps[s].end());
    if (s == kFull) {
      TableState full = std::get<TableState>(a->SaveCheckpoint({false, true, tier_checkpoint}));
      EXPECT_EQ(full.on_tier, tier_checkpoint);
      if (tier_checkpoint) {  // the file holds the rows in memory; the tier's checkpoint the rest
        EXPECT_GT(a->rows_on_disk(), 1000);
        EXPECT_EQ(full.ids.num_elements(), a->rows_held() - a->rows_on_disk());
        ASSERT_TRUE(disk_a->Checkpoint(TierCheckpointPath(dir, 0, 9)).ok());
      }
      Write(dir, Of(std::move(full), 9, 0));
      touched.clear();
    }
    if (s > kFull && s % 3 == 2) {  // deltas 1 to 4, three steps each
      TableState d = std::get<TableState>(a->SaveCheckpoint({true, true}));
      ASSERT_TRUE(d.changes_only);
      // A delta holds the rows its steps changed, not the table.
      EXPECT_LE(d.ids.num_elements(), static_cast<int64_t>(touched.size())) << "step " << s;
      EXPECT_LT(d.ids.num_elements(), a->rows_held()) << "step " << s;
      for (int64_t i = 0; i < d.ids.num_elements(); ++i) {
        ASSERT_TRUE(touched.count(d.ids.u64()[i])) << d.ids.u64()[i] << " was not updated";
      }
      removed += d.removed_ids.num_elements();
      Write(dir, Of(std::move(d), 9, static_cast<uint32_t>((s - kFull) / 3)));
      touched.clear();
    }
  }
  EXPECT_GT(removed, 0);  // TTL evictions travelled as removed ids
  if (tiered) {
    EXPECT_GT(a->rows_on_disk(), a->rows_held() / 2);
  }
  Result<Checkpoint> chain = LoadCheckpointChain(dir, 0);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(chain->meta.delta, 4u);
  ASSERT_EQ(chain->tables.size(), 1u);
  EXPECT_EQ(chain->tables[0].on_tier, tier_checkpoint);
  // What --export-npz reads: the chain with the tier's rows it lacks.
  Checkpoint filled = *chain;
  ASSERT_TRUE(FillFromTier(dir, 0, &filled).ok());
  const TableState& merged = filled.tables[0];
  const TableState whole = a->Snapshot();
  EXPECT_FALSE(merged.changes_only);
  EXPECT_EQ(merged.version, whole.version);
  EXPECT_EQ(merged.worker_clocks, whole.worker_clocks);
  EXPECT_EQ(RowsById(merged), RowsById(whole));
  ASSERT_EQ(merged.admission_ids.num_elements(), whole.admission_ids.num_elements());
  EXPECT_EQ(0, std::memcmp(merged.admission_counts.raw_data(), whole.admission_counts.raw_data(),
                           whole.admission_counts.byte_size()));

  // Restored from the chain, a partition continues as the one that wrote it; with the tier's
  // checkpoint, into a tier opened from it, as a restarted server does.
  if (tier_checkpoint) {
    b.reset();
    disk_b.reset();
    Result<std::unique_ptr<RowDisk>> from =
        RowDisk::Open(FreshDir(name + "_b"), 32, 16, TierCheckpointPath(dir, 0, 9));
    ASSERT_TRUE(from.ok()) << from.status().ToString();
    disk_b = std::move(*from);
    b = MakeTiered(TierJob(policy), disk_b.get());
  }
  ASSERT_TRUE(b->Restore(chain->tables[0]).ok());
  EXPECT_EQ(b->rows_held(), a->rows_held());
  for (size_t s = 24; s < steps.size(); ++s) {
    Step(*a, steps[s], static_cast<uint32_t>(s));
    Step(*b, steps[s], static_cast<uint32_t>(s));
  }
  std::vector<uint64_t> all(20000);
  std::iota(all.begin(), all.end(), 0);
  ExpectSameBits(*a, *b, all);
}

INSTANTIATE_TEST_SUITE_P(Tiers, CheckpointChainTest,
                         ::testing::Values(Rows::kMemory, Rows::kTier, Rows::kTierCheckpoint),
                         [](const auto& info) {
                           return info.param == Rows::kMemory ? "memory"
                                  : info.param == Rows::kTier ? "rocksdb"
                                                              : "rocksdb_tier_checkpoint";
                         });

TEST(CheckpointChainFilesTest, APartitionNotTrackingSavesItselfWholeInADelta) {
  auto a = MakeTiered(TierJob(TablePolicy{}), nullptr);
  Step(*a, {1, 2, 3}, 1);
  const TableState untracked = std::get<TableState>(a->SaveCheckpoint({true, true}));
  EXPECT_FALSE(untracked.changes_only);  // its changes since the last checkpoint are unknown
  EXPECT_EQ(untracked.ids.num_elements(), 3);
  Step(*a, {3, 4}, 2);
  const TableState changes = std::get<TableState>(a->SaveCheckpoint({true, true}));
  EXPECT_TRUE(changes.changes_only);
  EXPECT_EQ(RowsById(changes).size(), 2u);      // rows 3 and 4
  ASSERT_TRUE(a->Restore(a->Snapshot()).ok());  // a restore: changes unknown again
  EXPECT_FALSE(std::get<TableState>(a->SaveCheckpoint({true, false})).changes_only);
}

// A chain of a full checkpoint (rows 1, 2) and a delta (row 2 changed, 1 removed, 3 added).
struct SmallChain {
  std::string dir;
  TableState full, delta;
};

SmallChain MakeSmallChain(const std::string& name) {
  SmallChain c;
  c.dir = FreshDir(name);
  std::filesystem::create_directories(c.dir);
  auto a = MakeTiered(TierJob(TablePolicy{}), nullptr);
  Step(*a, {1, 2}, 1);
  c.full = std::get<TableState>(a->SaveCheckpoint({false, true}));
  Step(*a, {2, 3}, 2);
  c.delta = std::get<TableState>(a->SaveCheckpoint({true, true}));
  c.delta.removed_ids = testing::Ids({1});  // as if row 1 had been evicted
  return c;
}

TEST(CheckpointChainFilesTest, ADeltaOfAnotherChainOrPastAGapIsNeverApplied) {
  SmallChain c = MakeSmallChain("chain_stale");
  Write(c.dir, Of(c.full, 12, 0));
  Write(c.dir, Of(c.delta, 11, 1));  // left by the chain before: ignored
  Result<Checkpoint> stale = LoadCheckpointChain(c.dir, 0);
  ASSERT_TRUE(stale.ok()) << stale.status().ToString();
  EXPECT_EQ(stale->meta.delta, 0u);
  EXPECT_EQ(RowsById(stale->tables[0]), RowsById(c.full));

  std::filesystem::remove(DeltaPath(c.dir, 0, 1));
  Write(c.dir, Of(c.delta, 12, 2));  // delta 2 without delta 1: the chain ends at the gap
  EXPECT_EQ(LoadCheckpointChain(c.dir, 0)->meta.delta, 0u);

  Write(c.dir, Of(c.delta, 12, 1));
  Result<Checkpoint> applied = LoadCheckpointChain(c.dir, 0);
  ASSERT_TRUE(applied.ok()) << applied.status().ToString();
  EXPECT_EQ(applied->meta.delta, 2u);  // 1, then 2 (the same changes again: no harm)
  std::vector<uint64_t> ids;
  for (const auto& [id, row] : RowsById(applied->tables[0])) ids.push_back(id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{2, 3}));  // 1 removed, 2 changed, 3 added

  ASSERT_TRUE(RemoveDeltas(c.dir, 0).ok());
  EXPECT_FALSE(std::filesystem::exists(DeltaPath(c.dir, 0, 1)));
  EXPECT_FALSE(std::filesystem::exists(DeltaPath(c.dir, 0, 2)));
  EXPECT_TRUE(std::filesystem::exists(CheckpointPath(c.dir, 0)));
}

TEST(CheckpointChainFilesTest, AForeignOrDamagedDeltaIsAnErrorNamingIt) {
  SmallChain c = MakeSmallChain("chain_bad");
  Write(c.dir, Of(c.full, 5, 0));
  Checkpoint foreign = Of(c.delta, 5, 1);
  foreign.meta.model_signature = 43;
  Write(c.dir, foreign);
  Status other = LoadCheckpointChain(c.dir, 0).status();
  EXPECT_EQ(other.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.message().find(DeltaPath(c.dir, 0, 1) + " belongs to another job"),
            std::string::npos)
      << other.ToString();

  Write(c.dir, Of(c.delta, 5, 1));
  {
    std::fstream f(DeltaPath(c.dir, 0, 1), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);
    f.put('\x5a');
  }
  Status damaged = LoadCheckpointChain(c.dir, 0).status();
  EXPECT_EQ(damaged.code(), StatusCode::kCorruption);
  EXPECT_NE(damaged.message().find(DeltaPath(c.dir, 0, 1)), std::string::npos);

  // Changes in a full checkpoint: refused, as the file cannot say what they change.
  Write(c.dir, Of(c.delta, 5, 0));
  Status full = LoadCheckpoint(CheckpointPath(c.dir, 0)).status();
  EXPECT_EQ(full.code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace towerps::ps
