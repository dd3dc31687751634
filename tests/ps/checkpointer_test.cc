// The Checkpointer (ps/server/checkpointer.h) over a stopped shard holding a tiered table
// partition, through its final path (periodic checkpoints share everything from the write on):
// every K-th checkpoint is full and the ones between are deltas; a write that fails leaves the
// files as they were and makes the next checkpoint full, which removes the old chain's deltas;
// a full checkpoint keeps the tier's own checkpoint beside it and removes the older chain's; and
// what the directory holds in the end is the partition, bit for bit.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ps/server/checkpoint_chain.h"
#include "ps/server/checkpointer.h"
#include "ps/server/tier_checkpoint.h"
#include "tests/ps/tier_test_util.h"

namespace towerps::ps {
namespace {

namespace fs = std::filesystem;
using testing::FreshDir;
using testing::MakeTiered;
using testing::OpenDisk;
using testing::RowsById;
using testing::Step;
using testing::Steps;
using testing::TierJob;

// The names in `dir` that start with `prefix`.
std::vector<std::string> Named(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CheckpointerTest, AFailedWriteMakesTheNextCheckpointFullAndTheTierKeepsOneChain) {
  TablePolicy policy;
  policy.ttl_steps = 6;
  policy.storage = TableStorage::kRocksdb;
  policy.memory_mb = 0.25;  // most rows on disk
  const JobConfig job = TierJob(policy);
  auto disk = OpenDisk("checkpointer");
  ASSERT_NE(disk, nullptr);
  Mailbox<ServerOutput> outbox;
  BusyClock clock;
  std::vector<std::unique_ptr<Shard>> shards;
  shards.push_back(std::make_unique<Shard>(0, job, &outbox, &clock));
  std::unique_ptr<TableChunk> owned = MakeTiered(job, disk.get());
  TableChunk& table = *owned;
  shards[0]->Add(std::move(owned), ReplicaRole{});
  const std::string dir = FreshDir("checkpointer_files");
  Checkpointer checkpoints(dir, 0, /*every=*/0, /*full_every=*/3);
  ASSERT_TRUE(checkpoints.Find().ok());  // creates the directory
  checkpoints.set_disk(disk.get());
  const auto steps = Steps(8, 5, 1500, 12000);
  size_t s = 0;
  auto checkpoint = [&] {
    Step(table, steps[s], static_cast<uint32_t>(s));
    ++s;
    return checkpoints.Final(shards);
  };

  ASSERT_TRUE(checkpoint().ok());  // full: chain 1
  ASSERT_TRUE(checkpoint().ok());  // delta 1
  const std::vector<std::string> first_tier = Named(dir, "ps-0.tier-");
  ASSERT_EQ(first_tier.size(), 1u);
  EXPECT_TRUE(fs::exists(fs::path(dir) / "ps-0.ckpt.delta-1"));
  EXPECT_GT(table.rows_on_disk(), table.rows_held() / 2);

  // Delta 2 cannot be put in place (a directory is in the way): the write fails, naming it.
  fs::create_directories(fs::path(dir) / "ps-0.ckpt.delta-2" / "in-the-way");
  Status failed = checkpoint();
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.message().find("ps-0.ckpt.delta-2"), std::string::npos) << failed.message();
  fs::remove_all(fs::path(dir) / "ps-0.ckpt.delta-2");
  EXPECT_EQ(Named(dir, "ps-0.tier-"), first_tier);

  // The rows changed since delta 1 are in no file: the next checkpoint is full, of a new chain.
  ASSERT_TRUE(checkpoint().ok());
  EXPECT_EQ(checkpoints.deltas_written(), 1u);
  EXPECT_EQ(Named(dir, "ps-0.ckpt.delta-"), std::vector<std::string>{});
  const std::vector<std::string> tiers = Named(dir, "ps-0.tier-");
  ASSERT_EQ(tiers.size(), 1u);
  EXPECT_NE(tiers, first_tier);

  Result<Checkpoint> chain = LoadCheckpointChain(dir, 0);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_EQ(chain->meta.delta, 0u);
  ASSERT_EQ(chain->tables.size(), 1u);
  EXPECT_TRUE(chain->tables[0].on_tier);
  EXPECT_EQ(fs::path(TierToRestore(&*chain, dir, 0)).filename().string(), tiers[0]);
  ASSERT_TRUE(FillFromTier(dir, 0, &*chain).ok());
  EXPECT_EQ(RowsById(chain->tables[0]), RowsById(table.Snapshot()));
}

}  // namespace
}  // namespace towerps::ps
