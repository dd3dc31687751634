// A table job with its rows mostly on disk (--table-storage rocksdb with a small
// --table-memory-mb: ps/server/table_rows.h), admission after 2 steps and a TTL, through
// towerps-launch with real servers and workers: a sync job ends with the bits of the same job
// held in memory, and reruns give them again; a worker killed with SIGKILL and a server killed
// under --ps-replicas 2 (its backup holds its own tier) both end with the undisturbed job's
// bits; an async job completes; the summary reports the tier; and a job extended from
// incremental checkpoints (full ones, with the tier's own checkpoint beside them, and deltas)
// ends with the bits of the job run straight.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/fault/table_job_fixture.h"

namespace towerps::launch_test {
namespace {

// The servers' --table-dir: one per test process, each server's tier in ps-<rank> inside it.
fs::path TableDirPath() {
  return fs::path(::testing::TempDir()) / ("towerps_tier_job_" + std::to_string(::getpid()));
}

std::string TableDir() {
  fs::create_directories(TableDirPath());
  return TableDirPath().string();
}

// About 350 rows of each table per server in memory (8 tables of 1000 ids): most rows on disk.
std::vector<std::string> TierFlags() {
  return {"--table-admission-min-count",
          "2",
          "--table-ttl-steps",
          "3",
          "--table-storage",
          "rocksdb",
          "--table-memory-mb",
          "0.05",
          "--table-dir",
          TableDir()};
}

class TableTierJobTest : public TableJobFixture<120, TierFlags> {
 protected:
  static void TearDownTestSuite() {
    TableJobFixture::TearDownTestSuite();
    fs::remove_all(TableDirPath());
  }
};

TEST_F(TableTierJobTest, SyncJobHasTheBitsOfTheJobInMemoryAndRerunsGiveThemAgain) {
  ASSERT_EQ(Run(), 0);
  EXPECT_TRUE(dir_.Read("final.bin") == reference()) << "a rerun's final parameters differ";
  EXPECT_GT(Summary("table_rows_on_disk"), Summary("table_rows") / 2);
  EXPECT_GT(Summary("table_disk_writes"), 0);
  EXPECT_GT(Summary("table_memory_hit_rate"), 0);
  EXPECT_LT(Summary("table_memory_hit_rate"), 1);
  EXPECT_GT(Summary("table_evicted_ttl"), 0);
  EXPECT_GT(Summary("table_gradients_dropped"), 0);
  EXPECT_NE(dir_.Read("out.txt").find("rows on disk (memory hit rate"), std::string::npos);
  // Per table too: the summary's "tables" and each server's last stats line of each table.
  const nlohmann::json summary = nlohmann::json::parse(dir_.Read("summary.json"));
  ASSERT_TRUE(summary.contains("tables")) << summary.dump();
  ASSERT_EQ(summary["tables"].size(), 1u);
  const nlohmann::json& table = summary["tables"]["embedding"];
  EXPECT_EQ(table["rows"], summary["table_rows"]);
  EXPECT_EQ(table["rows_on_disk"], summary["table_rows_on_disk"]);
  EXPECT_EQ(table["evicted_ttl"], summary["table_evicted_ttl"]);
  EXPECT_EQ(table["memory_hit_rate"], summary["table_memory_hit_rate"]);
  EXPECT_GT(table["disk_reads_per_step"].get<double>(), 0);
  EXPECT_NE(dir_.Read("out.txt").find("[ps:1] I"), std::string::npos);
  EXPECT_NE(dir_.Read("out.txt").find("stats: table embedding: "), std::string::npos);

  // The same job with every row in memory: where a row lives never changes its bits.
  std::vector<std::string> argv = JobArgv(dir_.path(), {});
  for (const char* flag : {"--table-storage", "--table-memory-mb", "--table-dir"}) {
    auto at = std::find(argv.begin(), argv.end(), flag);
    ASSERT_NE(at, argv.end());
    argv.erase(at, at + 2);
  }
  fs::remove_all(dir_ / "run");
  Result<int> code = RunProcess(argv, dir_ / "memory.txt", {}, seconds(300));
  ASSERT_TRUE(code.ok() && *code == 0) << dir_.Read("memory.txt");
  EXPECT_TRUE(dir_.Read("final.bin") == reference())
      << "the job in memory ends with other parameters than the job on disk";
  EXPECT_EQ(Summary("table_rows_on_disk"), -1);  // no tier: not reported
}

TEST_F(TableTierJobTest, KilledWorkerIsRestartedAndTheFinalParametersAreBitIdentical) {
  ASSERT_EQ(Run({}, std::make_pair(50, 2)), 0);
  EXPECT_NE(dir_.Read("out.txt").find("worker:1 was killed by SIGKILL; restarting it"),
            std::string::npos);
  EXPECT_TRUE(dir_.Read("final.bin") == reference())
      << "final parameters differ from the undisturbed job's";
}

TEST_F(TableTierJobTest, KilledServerWithReplicasFailsOverAndTheFinalParametersAreBitIdentical) {
  ASSERT_EQ(Run({"--ps-replicas", "2"}, std::make_pair(50, 1), "ps", 1), 0);
  EXPECT_NE(dir_.Read("out.txt").find("ps:1 was killed by SIGKILL"), std::string::npos);
  EXPECT_TRUE(dir_.Read("final.bin") == reference())
      << "final parameters differ from the undisturbed job's";
}

TEST_F(TableTierJobTest, AJobExtendedFromIncrementalCheckpointsContinuesBitForBit) {
  const std::string ckpt = (dir_ / "ckpt").string();
  auto argv = [&](int steps) {
    std::vector<std::string> a = JobArgv(
        dir_.path(),
        {"--checkpoint-dir", ckpt, "--checkpoint-every", "10", "--checkpoint-full-every", "4"});
    *(std::find(a.begin(), a.end(), "--max-steps") + 1) = std::to_string(steps);
    return a;
  };
  // The first part on servers with two shard threads each (the tier's checkpoint then waits for
  // both shards), the rest on the default: the bits are the same (the reference: one shard).
  std::vector<std::string> two_threads = argv(65);
  two_threads.insert(two_threads.end(), {"--server-threads", "2"});
  Result<int> first = RunProcess(two_threads, dir_ / "first.txt", {}, seconds(300));
  ASSERT_TRUE(first.ok() && *first == 0) << dir_.Read("first.txt");
  // Full at 10 and 50, deltas at 20, 30, 40 (removed by the full one at 50), 60 and the end.
  for (const char* file : {"ps-0.ckpt", "ps-0.ckpt.delta-1", "ps-0.ckpt.delta-2", "ps-1.ckpt"}) {
    EXPECT_TRUE(fs::exists(dir_ / "ckpt" / file)) << file;
  }
  EXPECT_FALSE(fs::exists(dir_ / "ckpt" / "ps-0.ckpt.delta-3"));
  // The full checkpoint keeps the tier as RocksDB's checkpoint beside it, the last chain's only.
  int tiers = 0;
  for (const auto& entry : fs::directory_iterator(dir_ / "ckpt")) {
    tiers += entry.path().filename().string().rfind("ps-0.tier-", 0) == 0 ? 1 : 0;
  }
  EXPECT_EQ(tiers, 1);
  fs::remove_all(dir_ / "run");
  Result<int> rest = RunProcess(argv(kSteps), dir_ / "out.txt", {}, seconds(300));
  ASSERT_TRUE(rest.ok() && *rest == 0) << dir_.Read("out.txt");
  EXPECT_NE(dir_.Read("out.txt").find("the servers hold version 65 (restored)"), std::string::npos);
  EXPECT_NE(dir_.Read("out.txt").find("ps-1.ckpt and 2 delta(s) after it, at version 65"),
            std::string::npos);
  EXPECT_NE(dir_.Read("out.txt").find("ps-1, from its checkpoint"), std::string::npos);
  EXPECT_TRUE(dir_.Read("final.bin") == reference())
      << "the job extended from its checkpoints ends with other bits than the one run straight";
  // --eval-only reads the rows in the tier's checkpoint too: it scores the model as the job did.
  std::vector<std::string> eval = argv(kSteps);
  eval.push_back("--eval-only");
  Result<int> scored = RunProcess(eval, dir_ / "eval.txt", {}, seconds(120));
  ASSERT_TRUE(scored.ok() && *scored == 0) << dir_.Read("eval.txt");
  char accuracy[32];
  std::snprintf(accuracy, sizeof(accuracy), "%.4f", Summary("test_accuracy"));
  std::ostringstream expected;  // the loss as the worker prints it: 6 significant digits
  expected << "test accuracy = " << accuracy << ", test loss = " << Summary("test_loss");
  EXPECT_NE(dir_.Read("eval.txt").find(expected.str()), std::string::npos)
      << expected.str() << "\n"
      << dir_.Read("eval.txt") << dir_.Read("summary.json");
}

TEST_F(TableTierJobTest, AsyncJobCompletes) {
  ASSERT_EQ(Run({"--mode", "async", "--lr", "0.02"}), 0);
  const std::string exact =
      "\"final_versions\":[" + std::to_string(3 * kSteps) + "," + std::to_string(3 * kSteps) + "]";
  EXPECT_NE(dir_.Read("summary.json").find(exact), std::string::npos) << dir_.Read("summary.json");
  EXPECT_GT(Summary("table_rows_on_disk"), 0);
}

}  // namespace
}  // namespace towerps::launch_test
