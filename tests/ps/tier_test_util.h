// Helpers for the tests of tables with a disk tier and of their checkpoints: a fresh directory
// and tier, a tiered partition, steps of ids with a hot head, and the comparison of every
// observable bit of two partitions.
#ifndef TOWERPS_TESTS_PS_TIER_TEST_UTIL_H_
#define TOWERPS_TESTS_PS_TIER_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ps/server/row_disk.h"
#include "tests/ps/table_test_util.h"

namespace towerps::ps::testing {

// An empty directory for `name` in this test process, removed when the process exits (after
// the test's disks have closed).
inline std::string FreshDir(const std::string& name) {
  struct Made {
    std::vector<std::string> dirs;
    ~Made() {
      for (const std::string& d : dirs) std::filesystem::remove_all(d);
    }
  };
  static Made made;
  const std::string dir =
      ::testing::TempDir() + "towerps_tier_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  made.dirs.push_back(dir);
  return dir;
}

inline std::unique_ptr<RowDisk> OpenDisk(const std::string& name) {
  Result<std::unique_ptr<RowDisk>> disk = RowDisk::Open(FreshDir(name));
  EXPECT_TRUE(disk.ok()) << disk.status().ToString();
  return disk.ok() ? std::move(*disk) : nullptr;
}

inline bool SameBits(const float* a, const float* b, int64_t n) {
  return std::memcmp(a, b, static_cast<size_t>(n) * sizeof(float)) == 0;
}

// A sync job of one worker, dim 32 with Adagrad (a row of 64 floats), under `policy`.
inline JobConfig TierJob(const TablePolicy& policy) {
  JobConfig job = TableJob(UpdateMode::kSync, 1, TableOptimizerKind::kAdagrad);
  job.table_policies.defaults = policy;
  return job;
}

inline std::unique_ptr<TableChunk> MakeTiered(const JobConfig& job, RowDisk* disk) {
  const VariableSpec var = TableVariable("emb", 0, 32, 0.5f);
  Result<ChunkPlacement> p = ChunkPlacement::Compute({var}, job.servers, job.partition_bytes);
  return std::make_unique<TableChunk>(p->chunks()[0], var, job, nullptr, disk);
}

// Steps of ids below `space`: a hot head of 200 every step, and `tail` more drawn uniformly.
inline std::vector<std::vector<uint64_t>> Steps(int n, uint32_t seed, int tail, uint64_t space) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint64_t>> steps;
  for (int s = 0; s < n; ++s) {
    std::set<uint64_t> ids;
    for (int k = 0; k < 300; ++k) ids.insert(rng() % 200);
    for (int k = 0; k < tail; ++k) ids.insert(rng() % space);
    steps.emplace_back(ids.begin(), ids.end());
  }
  return steps;
}

inline void Step(TableChunk& t, const std::vector<uint64_t>& ids, uint32_t seed) {
  ShardCounters counters;
  const int64_t v = t.version();
  Result<PushOutcome> r = t.Push(
      RowsOf(0, v, v, ids, RandomRows(static_cast<int64_t>(ids.size()), 32, seed), 0), &counters);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

// Every observable bit of two partitions: their snapshots' rows, counts and last updates, and
// lookups (rows and counts) of `ids` at the current and the previous version.
inline void ExpectSameBits(const TableChunk& a, const TableChunk& b,
                           const std::vector<uint64_t>& ids) {
  const TableState sa = a.Snapshot(), sb = b.Snapshot();
  ASSERT_EQ(sa.ids.num_elements(), sb.ids.num_elements());
  EXPECT_EQ(0, std::memcmp(sa.ids.raw_data(), sb.ids.raw_data(), sa.ids.byte_size()));
  EXPECT_TRUE(SameBits(sa.rows.f32(), sb.rows.f32(), sa.rows.num_elements()));
  EXPECT_EQ(0, std::memcmp(sa.row_updates.raw_data(), sb.row_updates.raw_data(),
                           sa.row_updates.byte_size()));
  EXPECT_EQ(0, std::memcmp(sa.row_last_update.raw_data(), sb.row_last_update.raw_data(),
                           sa.row_last_update.byte_size()));
  for (int64_t version : {a.version(), a.version() - 1}) {
    Tensor ra, ua, rb, ub;
    ASSERT_TRUE(a.Lookup(Ids(ids), version, &ra, &ua).ok());
    ASSERT_TRUE(b.Lookup(Ids(ids), version, &rb, &ub).ok());
    EXPECT_TRUE(SameBits(ra.f32(), rb.f32(), ra.num_elements())) << "version " << version;
    EXPECT_EQ(0, std::memcmp(ua.raw_data(), ub.raw_data(), ua.byte_size()));
  }
}

// Row i of `s` by id, with its count, last update and floats: order-free comparison.
inline std::map<uint64_t, std::vector<uint64_t>> RowsById(const TableState& s) {
  std::map<uint64_t, std::vector<uint64_t>> out;
  const int64_t stride = (1 + s.slots) * s.dim;
  for (int64_t i = 0; i < s.ids.num_elements(); ++i) {
    std::vector<uint64_t> v = {s.row_updates.u32()[i], s.row_last_update.u64()[i]};
    for (int64_t j = 0; j < stride; ++j) {
      uint32_t bits = 0;
      std::memcpy(&bits, s.rows.f32() + i * stride + j, 4);
      v.push_back(bits);
    }
    out[s.ids.u64()[i]] = std::move(v);
  }
  return out;
}

}  // namespace towerps::ps::testing

#endif  // TOWERPS_TESTS_PS_TIER_TEST_UTIL_H_
