#include "job/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace towerps::ps {
namespace {

std::vector<VariableSpec> Mlp() {
  return {{"fc1/kernel", {784, 256}}, {"fc1/bias", {256}},       {"fc2/kernel", {256, 128}},
          {"fc2/bias", {128}},        {"fc3/kernel", {128, 10}}, {"fc3/bias", {10}}};
}

TEST(PlacementTest, ChunksCoverEveryVariableExactlyOnce) {
  auto vars = Mlp();
  auto p = ChunkPlacement::Compute(vars, 3, 64 << 10);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (uint32_t v = 0; v < vars.size(); ++v) {
    int64_t next = 0;
    for (const ChunkSpec& c : p->ChunksOf(v)) {
      EXPECT_EQ(c.variable_id, v);
      EXPECT_EQ(c.offset, next);
      EXPECT_LE(c.bytes, size_t{64} << 10);
      EXPECT_GT(c.num_elements, 0);
      next += c.num_elements;
    }
    EXPECT_EQ(next, NumElements(vars[v].shape));
  }
}

TEST(PlacementTest, TablesHaveOnePartitionPerServerAndLeaveTheDenseBalanceAlone) {
  std::vector<VariableSpec> vars = Mlp();
  const auto dense = ChunkPlacement::Compute(vars, 3, 64 << 10);
  vars.insert(vars.begin() + 2, TableVariable("user/embedding", 0, 32, 0.05f));
  const auto p = ChunkPlacement::Compute(vars, 3, 64 << 10);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const auto parts = p->ChunksOf(2);
  ASSERT_EQ(parts.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_TRUE(parts[s].is_table());
    EXPECT_EQ(parts[s].server, s);
    EXPECT_EQ(parts[s].chunk_id, static_cast<uint32_t>(s));
    EXPECT_EQ(parts[s].table_dim, 32);
    EXPECT_EQ(parts[s].num_elements, 0);
  }
  EXPECT_EQ(p->BytesPerServer(), dense->BytesPerServer());
  EXPECT_NE(p->Describe(vars).find("user/embedding partition 1 of 3 (rows by id hash, dim 32, "
                                   "unbounded) -> server 1"),
            std::string::npos)
      << p->Describe(vars);
  // A table's shape is checked like its kind.
  vars[2].shape = {10, 0};
  EXPECT_FALSE(ChunkPlacement::Compute(vars, 3, 64 << 10).ok());
}

// --table-placement whole: each table one partition holding every row, the tables spread over
// the servers in turn; a --table-policy item places one table by rows again. The dense balance
// is untouched.
TEST(PlacementTest, WholeTablesAreOnePartitionEachSpreadOverTheServersInTurn) {
  std::vector<VariableSpec> vars = Mlp();
  const auto dense = ChunkPlacement::Compute(vars, 3, 64 << 10);
  for (int t = 0; t < 4; ++t) vars.push_back(TableVariable("t" + std::to_string(t), 0, 8, 0.05f));
  TablePolicies whole;
  whole.defaults.placement = TablePlacement::kWhole;
  whole.overrides = "t2:placement=rows";
  const auto p = ChunkPlacement::Compute(vars, 3, 64 << 10, 2, whole);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  const size_t first = Mlp().size();
  const int expect_server[] = {0, 1, -1, 2};  // t2 by rows; the next whole table takes server 2
  for (int t : {0, 1, 3}) {
    const auto parts = p->ChunksOf(static_cast<uint32_t>(first + t));
    ASSERT_EQ(parts.size(), 1u) << t;
    EXPECT_EQ(parts[0].server, expect_server[t]) << t;
    EXPECT_EQ(parts[0].table_partitions, 1);
    EXPECT_EQ(parts[0].chunk_id, 0u);
  }
  const auto rows = p->ChunksOf(static_cast<uint32_t>(first + 2));
  ASSERT_EQ(rows.size(), 6u);  // 2 per server
  for (const ChunkSpec& c : rows) EXPECT_EQ(c.table_partitions, 6);
  EXPECT_EQ(rows[4].server, 1);
  EXPECT_EQ(p->BytesPerServer(), dense->BytesPerServer());
  const std::string d = p->Describe(vars);
  EXPECT_NE(d.find("t3 whole (dim 8, unbounded) -> server 2"), std::string::npos) << d;
  EXPECT_NE(d.find("t2 partition 4 of 6 (rows by id hash, dim 8, unbounded) -> server 1"),
            std::string::npos)
      << d;
  // The job's flags say the same through ForJob.
  JobConfig job;
  job.servers = 3;
  job.partition_bytes = 64 << 10;
  job.table_partitions = 2;
  job.table_policies = whole;
  const auto from_job = ChunkPlacement::ForJob(vars, job);
  ASSERT_TRUE(from_job.ok());
  EXPECT_EQ(from_job->Describe(vars), d);
  EXPECT_TRUE(job.Validate().ok()) << job.Validate();
  // Partitions per server with every table whole would split nothing: refused, not ignored.
  job.table_policies.overrides = "";
  const Status unused = job.Validate();
  EXPECT_EQ(unused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unused.message().find("--table-partitions=2 splits the tables placed by rows, but "
                                  "--table-placement whole puts every table whole"),
            std::string::npos)
      << unused;
}

// Power-law ids are small and adjacent: a hash spreads them evenly, a range would not.
TEST(PlacementTest, TableRowsSpreadEvenlyOverPartitions) {
  for (int partitions : {2, 3, 7}) {
    std::vector<int> rows(partitions, 0);
    for (uint64_t id = 0; id < 70000; ++id) ++rows[TablePartitionOf(id, partitions)];
    for (int count : rows) EXPECT_NEAR(count, 70000.0 / partitions, 0.02 * 70000 / partitions);
    EXPECT_EQ(TablePartitionOf(12345, partitions), TablePartitionOf(12345, partitions));
  }
  EXPECT_EQ(TablePartitionOf(~0ull, 1), 0);
}

TEST(PlacementTest, LoadsStayWithinOneChunk) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<VariableSpec> vars;
    const int nvars = 1 + rng() % 40;
    for (int i = 0; i < nvars; ++i) {
      vars.push_back({"v" + std::to_string(i), {1 + static_cast<int64_t>(rng() % 100000)}});
    }
    const int servers = 1 + rng() % 6;
    const size_t partition = 4 * (1 + rng() % 20000);
    auto p = ChunkPlacement::Compute(vars, servers, partition);
    ASSERT_TRUE(p.ok());
    size_t biggest = 0;
    for (const ChunkSpec& c : p->chunks()) biggest = std::max(biggest, c.bytes);
    auto load = p->BytesPerServer();
    const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
    EXPECT_LE(*hi - *lo, biggest) << "trial " << trial;
  }
}

TEST(PlacementTest, SmallVariablesDoNotPinServerZero) {
  std::vector<VariableSpec> vars;
  for (int i = 0; i < 12; ++i) vars.push_back({"bias" + std::to_string(i), {10}});
  auto p = ChunkPlacement::Compute(vars, 4, 1 << 20);
  ASSERT_TRUE(p.ok());
  for (size_t bytes : p->BytesPerServer()) EXPECT_EQ(bytes, 3u * 40u);
}

TEST(PlacementTest, DeterministicAcrossCalls) {
  auto vars = Mlp();
  auto a = ChunkPlacement::Compute(vars, 2, 100000);
  auto b = ChunkPlacement::Compute(vars, 2, 100000);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->chunks().size(), b->chunks().size());
  for (size_t i = 0; i < a->chunks().size(); ++i) {
    EXPECT_EQ(a->chunks()[i].server, b->chunks()[i].server);
    EXPECT_EQ(a->chunks()[i].offset, b->chunks()[i].offset);
  }
  EXPECT_EQ(a->Describe(vars), b->Describe(vars));
  EXPECT_NE(a->Describe(vars).find("fc1/kernel chunk 0"), std::string::npos);
}

TEST(PlacementTest, BadArgumentsAreErrors) {
  EXPECT_FALSE(ChunkPlacement::Compute({}, 2, 1024).ok());
  EXPECT_FALSE(ChunkPlacement::Compute(Mlp(), 0, 1024).ok());
  auto tiny = ChunkPlacement::Compute(Mlp(), 2, 2);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("--partition-bytes=2"), std::string::npos);
  // A register message's variables are a peer's: what they would make a server allocate is
  // bounded before any chunk is made (before, [2^62] floats made 2^44 chunk specs).
  const std::vector<VariableSpec> huge = {{"w", {int64_t{1} << 62}}};
  auto refused = ChunkPlacement::Compute(huge, 1, 1 << 20);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("variable w"), std::string::npos)
      << refused.status().ToString();
  const std::vector<VariableSpec> big = {{"w", {kMaxDenseElements}}};
  EXPECT_TRUE(ChunkPlacement::Compute(big, 1, 1 << 20).ok());
  auto many = ChunkPlacement::Compute(big, 1, 4096);
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("raise --partition-bytes"), std::string::npos)
      << many.status().ToString();
}

}  // namespace
}  // namespace towerps::ps
