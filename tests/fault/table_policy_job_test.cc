// A table job under every policy at once (admission after 2 steps, a TTL, a capacity with LRU
// eviction: job/table_policy.h) through towerps-launch, with real servers and workers: sync
// reruns give the same bits; a worker killed with SIGKILL and a server killed under
// --ps-replicas 2 both end with the undisturbed job's bits (the servers keep an evicted row's
// previous values and every pending count, so a restarted step or a backup decides the same);
// an async job completes; and the summary counts what the policies did.
#include "tests/fault/table_job_fixture.h"

namespace towerps::launch_test {
namespace {

// Every policy at once: ids wait 2 steps, rows live 3 steps unless updated, and each server
// holds at most 2400 rows of the table (of 8000 ids), the least recently updated evicted.
std::vector<std::string> PolicyFlags() {
  return {"--table-admission-min-count", "2",    "--table-ttl-steps", "3",
          "--table-capacity-rows",       "2400", "--table-eviction",  "lru"};
}

class TablePolicyJobTest : public TableJobFixture<120, PolicyFlags> {};

TEST_F(TablePolicyJobTest, SyncRerunHasTheSameBitsAndThePoliciesActed) {
  ASSERT_EQ(Run(), 0);
  EXPECT_TRUE(dir_.Read("final.bin") == reference()) << "a rerun's final parameters differ";
  EXPECT_GT(Summary("table_rows_admitted"), 0);
  EXPECT_GT(Summary("table_gradients_dropped"), 0);
  EXPECT_GT(Summary("table_evicted_ttl"), 0);
  EXPECT_GT(Summary("table_evicted_capacity"), 0);
  EXPECT_GT(Summary("table_rows"), 0);
  EXPECT_LE(Summary("table_rows"), 2 * 2400);
  EXPECT_GT(Summary("test_accuracy"), 0.4);  // 4 classes: it still learns
  EXPECT_NE(dir_.Read("out.txt").find("by capacity"), std::string::npos);
}

TEST_F(TablePolicyJobTest, KilledWorkerIsRestartedAndTheFinalParametersAreBitIdentical) {
  for (const auto& [step, delay] : {std::make_pair(30, 2), std::make_pair(70, 5)}) {
    SCOPED_TRACE("worker 1 killed after step " + std::to_string(step));
    ASSERT_EQ(Run({}, std::make_pair(step, delay)), 0);
    EXPECT_NE(dir_.Read("out.txt").find("worker:1 was killed by SIGKILL; restarting it"),
              std::string::npos);
    EXPECT_TRUE(dir_.Read("final.bin") == reference())
        << "final parameters differ from the undisturbed job's";
  }
}

TEST_F(TablePolicyJobTest, KilledServerWithReplicasFailsOverAndTheFinalParametersAreBitIdentical) {
  const std::vector<std::string> replicas = {"--ps-replicas", "2"};
  ASSERT_EQ(Run(replicas, std::make_pair(50, 1), "ps", 1), 0);
  EXPECT_NE(dir_.Read("out.txt").find("ps:1 was killed by SIGKILL"), std::string::npos);
  EXPECT_TRUE(dir_.Read("final.bin") == reference())
      << "final parameters differ from the undisturbed job's";
}

TEST_F(TablePolicyJobTest, AsyncJobCompletes) {
  ASSERT_EQ(Run({"--mode", "async", "--lr", "0.02"}), 0);
  // Every worker's iterations applied once: each server at workers x steps versions.
  const std::string exact =
      "\"final_versions\":[" + std::to_string(3 * kSteps) + "," + std::to_string(3 * kSteps) + "]";
  EXPECT_NE(dir_.Read("summary.json").find(exact), std::string::npos) << dir_.Read("summary.json");
  EXPECT_GT(Summary("table_evicted_ttl") + Summary("table_evicted_capacity"), 0);
}

}  // namespace
}  // namespace towerps::launch_test
