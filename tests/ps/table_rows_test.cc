// The tables' disk tier (ps/server/row_disk.h, ps/server/table_rows.h): records read back with
// the bits they were written with; a table partition whose memory budget sends most rows to disk
// has, step after step, the bits of the same partition held whole in memory (values, optimizer
// state, counts, snapshots, the previous version), under admission and TTL eviction too; and a
// tiered partition restored from a snapshot continues bit for bit; the tier's own checkpoint
// holds what each shard had written when they met; a lookup prefetched while an update runs
// reads what one in memory does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <thread>

#include "ps/server/row_disk.h"
#include "ps/server/server_options.h"
#include "ps/server/table_rows.h"
#include "ps/server/tier_checkpoint.h"
#include "tests/ps/table_test_util.h"
#include "tests/ps/tier_test_util.h"

namespace towerps::ps {
namespace {

using testing::ExpectSameBits;
using testing::FreshDir;
using testing::Ids;
using testing::MakeTiered;
using testing::OpenDisk;
using testing::RandomRows;
using testing::RowsOf;
using testing::SameBits;
using testing::Step;
using testing::Steps;
using testing::TableJob;
using testing::TierJob;

TEST(DiskRowsTest, RowsReadBackWithTheirBitsInTheirPartitionOnly) {
  auto disk = OpenDisk("records");
  ASSERT_NE(disk, nullptr);
  constexpr int64_t kStride = 6;
  DiskRows a(disk.get(), 3, 1, kStride);
  DiskRows b(disk.get(), 3, 2, kStride);  // the next partition: its keys follow a's
  std::mt19937 rng(5);
  std::vector<uint64_t> ids;
  std::vector<float> values(100 * kStride);
  std::vector<DiskRow> rows;
  for (int i = 0; i < 100; ++i) ids.push_back(rng() % 100000 + (i % 3 == 0 ? ~0ull - 1000 : 0));
  std::set<uint64_t> unique(ids.begin(), ids.end());
  ids.assign(unique.begin(), unique.end());
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int64_t j = 0; j < kStride; ++j) {
      const uint32_t bits = rng();  // any bits: NaN payloads, denormals, -0
      std::memcpy(&values[i * kStride + j], &bits, 4);
    }
    rows.push_back(
        {&values[i * kStride], static_cast<uint32_t>(rng()), static_cast<int64_t>(rng())});
  }
  a.Write(ids, rows);
  b.Write({ids[0]}, {rows[1]});
  EXPECT_EQ(a.size(), static_cast<int64_t>(ids.size()));

  std::vector<uint64_t> asked = {ids[7], 424242424242ull, ids[0], ids.back()};
  std::vector<size_t> found;
  a.Read(asked.data(), asked.size(), [&](size_t i, const DiskRow& row) {
    const size_t k =
        static_cast<size_t>(std::lower_bound(ids.begin(), ids.end(), asked[i]) - ids.begin());
    EXPECT_TRUE(SameBits(row.values, rows[k].values, kStride)) << asked[i];
    EXPECT_EQ(row.updates, rows[k].updates);
    EXPECT_EQ(row.last_update, rows[k].last_update);
    found.push_back(i);
  });
  EXPECT_EQ(found, (std::vector<size_t>{0, 2, 3}));  // in order; the absent id not called

  std::vector<uint64_t> scanned;
  a.Scan([&](uint64_t id, const DiskRow&) { scanned.push_back(id); });
  EXPECT_EQ(scanned, ids);  // increasing, the big ids last: keys are big-endian

  a.Erase({ids[0], ids[1]});
  EXPECT_EQ(a.size(), static_cast<int64_t>(ids.size()) - 2);
  a.Clear();
  EXPECT_EQ(a.size(), 0);
  scanned.clear();
  b.Scan([&](uint64_t id, const DiskRow& row) {
    scanned.push_back(id);
    EXPECT_TRUE(SameBits(row.values, rows[1].values, kStride));
  });
  EXPECT_EQ(scanned, (std::vector<uint64_t>{ids[0]}));  // b's row outlived a's Clear
}

TEST(DiskRowsTest, OpeningATierDiscardsWhatAnEarlierProcessLeft) {
  const std::string dir = FreshDir("reopen");
  {
    Result<std::unique_ptr<RowDisk>> first = RowDisk::Open(dir);
    ASSERT_TRUE(first.ok());
    DiskRows rows(first->get(), 0, 0, 1);
    const float v = 1.0f;
    rows.Write({9}, {{&v, 1, 1}});
  }
  Result<std::unique_ptr<RowDisk>> second = RowDisk::Open(dir);
  ASSERT_TRUE(second.ok());
  DiskRows rows(second->get(), 0, 0, 1);
  int seen = 0;
  rows.Scan([&](uint64_t, const DiskRow&) { ++seen; });
  EXPECT_EQ(seen, 0);
}

TEST(DiskRowsTest, ATierInUseIsNeitherClearedNorSharedByAnotherServer) {
  const std::string dir = FreshDir("in_use");
  Result<std::unique_ptr<RowDisk>> first = RowDisk::Open(dir);
  ASSERT_TRUE(first.ok());
  DiskRows rows(first->get(), 0, 0, 1);
  const float v = 2.0f;
  rows.Write({4}, {{&v, 1, 1}});
  // Another job's server of the same rank given the same --table-dir: refused, naming it.
  Result<std::unique_ptr<RowDisk>> second = RowDisk::Open(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(second.status().message().find(dir + " (is another server using it?"),
            std::string::npos)
      << second.status().message();
  int seen = 0;
  rows.Scan([&](uint64_t id, const DiskRow& row) {
    ++seen;
    EXPECT_EQ(id, 4u);
    EXPECT_EQ(row.values[0], 2.0f);
  });
  EXPECT_EQ(seen, 1);  // the first server's tier is untouched
}

// Partition p's records in `disk`: id -> (first float, update count).
std::map<uint64_t, std::pair<float, uint32_t>> RecordsOf(RowDisk* disk, uint32_t p) {
  std::map<uint64_t, std::pair<float, uint32_t>> out;
  DiskRows rows(disk, 0, p, 1);
  rows.Scan([&](uint64_t id, const DiskRow& row) { out[id] = {row.values[0], row.updates}; });
  return out;
}

// The tier's checkpoint taken where a server's shards meet (TierSnapshot) holds each shard's
// records as they were when it arrived, however late, and none it wrote once it went on; a tier
// opened from it starts with them, and what that tier writes leaves the checkpoint as it was.
TEST(DiskRowsTest, ATierCheckpointHoldsEachShardsRecordsAsTheyWereWhenItArrived) {
  auto disk = OpenDisk("tier_meet");
  const std::string kept = FreshDir("tier_meet_checkpoint");
  TierSnapshot meet(3, disk.get(), kept);
  std::vector<std::thread> shards;
  for (uint32_t p = 0; p < 3; ++p) {
    shards.emplace_back([&, p] {
      DiskRows rows(disk.get(), 0, p, 1);
      const float before = static_cast<float>(p), after = 100.0f + static_cast<float>(p);
      rows.Write({1, 2}, {{&before, 1, 1}, {&before, 1, 1}});
      std::this_thread::sleep_for(std::chrono::milliseconds(30 * p));  // arriving one by one
      meet.ArriveAndWait();
      rows.Write({2, 3}, {{&after, 2, 2}, {&after, 2, 2}}, 1);
    });
  }
  for (std::thread& t : shards) t.join();
  ASSERT_TRUE(meet.status().ok()) << meet.status().ToString();
  std::map<uint64_t, std::pair<float, uint32_t>> expected[3];
  {
    Result<std::unique_ptr<RowDisk>> read = RowDisk::OpenReadOnly(kept);
    ASSERT_TRUE(read.ok()) << read.status().ToString();
    for (uint32_t p = 0; p < 3; ++p) {
      expected[p] = {{1, {static_cast<float>(p), 1u}}, {2, {static_cast<float>(p), 1u}}};
      EXPECT_EQ(RecordsOf(read->get(), p), expected[p]) << "partition " << p;
      EXPECT_NE(RecordsOf(disk.get(), p), expected[p]);  // the live tier went on
    }
  }
  Result<std::unique_ptr<RowDisk>> from = RowDisk::Open(FreshDir("tier_meet_live"), 32, 16, kept);
  ASSERT_TRUE(from.ok()) << from.status().ToString();
  DiskRows rows(from->get(), 0, 0, 1);
  rows.Recount();
  EXPECT_EQ(rows.size(), 2);
  const float v = 7.0f;
  rows.Write({1, 9}, {{&v, 3, 3}, {&v, 3, 3}}, 1);
  EXPECT_TRUE((*from)->Checkpoint(FreshDir("tier_meet_flushed")).ok());  // flushed to files too
  Result<std::unique_ptr<RowDisk>> again = RowDisk::OpenReadOnly(kept);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(RecordsOf(again->get(), 0), expected[0]);
  // Not a tier checkpoint: refused, naming it.
  const std::string missing = FreshDir("tier_meet_missing");
  Result<std::unique_ptr<RowDisk>> none =
      RowDisk::Open(FreshDir("tier_meet_none"), 32, 16, missing);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(missing + " is missing"), std::string::npos)
      << none.status().message();
}

TEST(TableRowsTest, APartitionMostlyOnDiskHasTheBitsOfOneInMemory) {
  TablePolicy memory;
  memory.admission_min_count = 2;
  memory.ttl_steps = 8;
  TablePolicy tiered = memory;
  tiered.storage = TableStorage::kRocksdb;
  tiered.memory_mb = 1;  // about 3,000 rows of 64 floats: most of the table is on disk
  auto disk = OpenDisk("bits");
  ASSERT_NE(disk, nullptr);
  auto a = MakeTiered(TierJob(tiered), disk.get());
  auto reference = MakeTiered(TierJob(memory), nullptr);
  const auto steps = Steps(24, 1, 2500, 12000);
  std::vector<uint64_t> all(12000);
  std::iota(all.begin(), all.end(), 0);
  int64_t most_on_disk = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    // On odd steps a worker's pull comes first (as a step's does): the update then takes the
    // rows that pull read from disk, not the disk.
    if (s % 2 == 1) {
      ASSERT_FALSE(testing::Read(*a, steps[s]).empty());
    }
    Step(*a, steps[s], static_cast<uint32_t>(s));
    Step(*reference, steps[s], static_cast<uint32_t>(s));
    most_on_disk = std::max(most_on_disk, a->rows_on_disk());
    if (s % 6 == 5) ExpectSameBits(*a, *reference, all);
    ASSERT_EQ(a->rows_held(), reference->rows_held()) << "step " << s;
  }
  ExpectSameBits(*a, *reference, all);
  EXPECT_GT(most_on_disk, a->rows_held() / 2);  // the budget held: most rows went to disk
  EXPECT_LE(a->rows_held() - a->rows_on_disk(),
            TableRows::MemoryRows(1, 1, 64) + 2700);  // at most one step's rows over it
  // TTL evicted rows from disk as from memory: the same rows went, for the same reason.
  EXPECT_EQ(a->policy_counts().evicted_ttl, reference->policy_counts().evicted_ttl);
  EXPECT_GT(a->policy_counts().evicted_ttl, 0);
  EXPECT_EQ(a->policy_counts().admitted, reference->policy_counts().admitted);
}

// A lookup whose rows were prefetched before the update ahead of it (a push's thenPull:
// TableRows::Prefetch, on the tier's reader thread) reads what the same lookup of a partition in
// memory reads, though that update loaded, spilled and expired rows of it meanwhile.
TEST(TableRowsTest, APrefetchedLookupReadsWhatTheUpdateBeforeItLeft) {
  TablePolicy memory;
  memory.admission_min_count = 2;
  memory.ttl_steps = 4;
  TablePolicy tiered = memory;
  tiered.storage = TableStorage::kRocksdb;
  tiered.memory_mb = 0.5;
  auto disk = OpenDisk("prefetch");
  ASSERT_NE(disk, nullptr);
  auto a = MakeTiered(TierJob(tiered), disk.get());
  auto reference = MakeTiered(TierJob(memory), nullptr);
  const auto steps = Steps(30, 3, 2500, 8000);
  for (size_t s = 0; s + 1 < steps.size(); ++s) {
    // The next step's pull rides on this step's push: its rows are read while this one applies.
    a->Prefetch(PullAsk{.ids = Ids(steps[s + 1])});
    Step(*a, steps[s], static_cast<uint32_t>(s));
    Step(*reference, steps[s], static_cast<uint32_t>(s));
    const std::vector<float> got = testing::Read(*a, steps[s + 1]);
    const std::vector<float> want = testing::Read(*reference, steps[s + 1]);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_TRUE(SameBits(got.data(), want.data(), static_cast<int64_t>(got.size())))
        << "step " << s;
  }
  EXPECT_GT(a->rows_on_disk(), a->rows_held() / 2);
  EXPECT_GT(a->policy_counts().evicted_ttl, 0);
}

TEST(TableRowsTest, ARestoredTieredPartitionContinuesBitForBit) {
  TablePolicy tiered;
  tiered.ttl_steps = 5;
  tiered.storage = TableStorage::kRocksdb;
  tiered.memory_mb = 1;
  tiered.eviction = EvictionOrder::kLru;
  auto disk_a = OpenDisk("restore_a");
  auto disk_b = OpenDisk("restore_b");
  ASSERT_NE(disk_a, nullptr);
  ASSERT_NE(disk_b, nullptr);
  auto a = MakeTiered(TierJob(tiered), disk_a.get());
  auto b = MakeTiered(TierJob(tiered), disk_b.get());
  const auto steps = Steps(20, 2, 700, 40000);
  for (size_t s = 0; s < steps.size(); ++s) {
    if (s == 11) {
      ASSERT_GT(a->rows_on_disk(), 0);
      ASSERT_TRUE(b->Restore(a->Snapshot(/*replica=*/true)).ok());
      EXPECT_GT(b->rows_on_disk(), 0);  // the restore kept its budget
    }
    Step(*a, steps[s], static_cast<uint32_t>(s));
    if (s >= 11) Step(*b, steps[s], static_cast<uint32_t>(s));
  }
  std::vector<uint64_t> all(40000);
  std::iota(all.begin(), all.end(), 0);
  ExpectSameBits(*a, *b, all);
}

TEST(TableRowsTest, AServerRefusesAMissingOrUnusableTableDir) {
  ServerOptions o;
  o.job.table_policies.overrides = "emb_2:storage=rocksdb,emb_2:memory_mb=16";
  Status none = o.ValidateTableDir();
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("table 'emb_2': storage=rocksdb keeps rows on disk: give the "
                                "servers a --table-dir"),
            std::string::npos)
      << none.message();
  o.table_dir = FreshDir("missing");
  Status missing = o.ValidateTableDir();
  EXPECT_NE(missing.message().find("--table-dir=" + o.table_dir), std::string::npos)
      << missing.message();
  EXPECT_NE(missing.message().find("is not a directory"), std::string::npos);
  o.table_dir = "/proc/self/status";  // a file
  EXPECT_EQ(o.ValidateTableDir().code(), StatusCode::kInvalidArgument);
  o.table_dir = ::testing::TempDir();
  EXPECT_TRUE(o.ValidateTableDir().ok());
  o.job.table_policies.overrides = "";
  o.table_dir = "";
  EXPECT_TRUE(o.ValidateTableDir().ok());  // no table on disk: no directory needed
}

}  // namespace
}  // namespace towerps::ps
