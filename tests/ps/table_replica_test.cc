// Table partitions replicated (--ps-replicas 2; ps/server/replica_state.h,
// ps/server/table_chunk.h): a sync backup fed the primary's step sums holds the primary's bits; one
// restored from the primary's state in the middle of a step, through the wire encoding, finishes it
// and goes on bit for bit (pending pushes, previous rows and lazy Adam's state carried over); a
// malformed state is a kProtocol error, and one that does not fit the partition kCorruption, never
// a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "job/replica_placement.h"
#include "ps/server/replica_state.h"
#include "tests/ps/received.h"
#include "tests/ps/table_test_util.h"

namespace towerps::ps {
namespace {

using testing::Ids;
using testing::RandomRows;
using testing::Read;
using testing::RowsOf;

constexpr int64_t kDim = 3;

JobConfig Job() {
  JobConfig j = testing::TableJob(UpdateMode::kSync, 3, TableOptimizerKind::kAdam);
  j.ps_replicas = 2;
  return j;
}

std::unique_ptr<TableChunk> Table(const JobConfig& job) { return testing::MakeTable(job, kDim); }

// Worker w's push of step `step`: ids of its own and some shared.
Contribution PushOf(int w, int64_t step) {
  std::vector<uint64_t> ids = {1, 2};
  for (uint64_t id = 10 + static_cast<uint64_t>(w); id < 40; id += 3 + step) ids.push_back(id);
  const auto n = static_cast<int64_t>(ids.size());
  return RowsOf(w, step, step, ids, RandomRows(n, kDim, static_cast<uint32_t>(100 * step + w)));
}

// Encodes `state` as a replicate message and decodes it as the backup's server would.
Result<TableState> ThroughTheWire(const TableState& state, const JobConfig& job,
                                  const ChunkSpec& spec) {
  OutgoingMessage out(proto::MessageType::REPLICATE);
  out.header().setReplicaOp(proto::ReplicaOp::STATE);
  AddTableReplicaState(state, &out);
  TOWERPS_ASSIGN_OR_RETURN(IncomingMessage in, Received(out, "server:0"));
  return ReadTableReplicaState(in, spec, job);
}

std::vector<uint64_t> AllIds() {
  std::vector<uint64_t> ids(40);
  for (uint64_t i = 0; i < 40; ++i) ids[i] = i;
  return ids;
}

TEST(TableReplicaTest, BackupFedTheStepSumsHoldsThePrimarysBits) {
  const JobConfig job = Job();
  auto primary = Table(job);
  auto backup = Table(job);
  ShardCounters counters, replica;
  int forwarded = 0;
  primary->set_step_hook([&](int64_t step, const std::vector<Tensor>& sums, int k) {
    ASSERT_TRUE(backup->ApplyStep(step, sums, k, &replica).ok());
    ++forwarded;
  });
  for (int64_t step = 0; step < 4; ++step) {
    for (int w : {2, 0, 1}) ASSERT_TRUE(primary->Push(PushOf(w, step), &counters).ok());
  }
  // A step whose every gradient is refused (non-finite) changes no row but still counts, on the
  // backup too.
  for (int w = 0; w < 3; ++w) {
    Contribution nan = PushOf(w, 4);
    nan.gradient.f32()[1] = std::nanf("");
    ASSERT_EQ(primary->Push(std::move(nan), &counters)->kind, PushOutcome::Kind::kRejected);
  }
  EXPECT_EQ(forwarded, 5);
  EXPECT_EQ(backup->version(), 5);
  EXPECT_EQ(Read(*backup, AllIds()), Read(*primary, AllIds()));
  EXPECT_EQ(backup->rows_held(), primary->rows_held());
  // The previous version too (a restarted worker's exact pull after a failover).
  Tensor a, b, ua, ub;
  ASSERT_TRUE(primary->Lookup(Ids(AllIds()), 4, &a, &ua).ok());
  ASSERT_TRUE(backup->Lookup(Ids(AllIds()), 4, &b, &ub).ok());
  EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()));
  // A step from elsewhere is refused.
  EXPECT_FALSE(backup->ApplyStep(7, Ids({1}), RandomRows(1, kDim, 1), 1, &replica).ok());
}

TEST(TableReplicaTest, BackupRestoredMidStepFinishesItBitForBitAsThePrimary) {
  const JobConfig job = Job();
  auto primary = Table(job);
  ShardCounters counters;
  for (int64_t step = 0; step < 3; ++step) {
    for (int w = 0; w < 3; ++w) ASSERT_TRUE(primary->Push(PushOf(w, step), &counters).ok());
  }
  // Step 3 half done: workers 2 and 0 pushed, worker 1 has not.
  ASSERT_TRUE(primary->Push(PushOf(2, 3), &counters).ok());
  ASSERT_TRUE(primary->Push(PushOf(0, 3), &counters).ok());
  Result<TableState> state =
      ThroughTheWire(primary->Snapshot(/*replica=*/true), job, primary->spec());
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->pending.size(), 2u);
  EXPECT_EQ(state->previous_version, 2);
  auto backup = Table(job);
  ASSERT_TRUE(backup->Restore(*state).ok());
  ASSERT_EQ(backup->version(), 3);
  // A repeated push of a pending one is a duplicate on both (it was carried over).
  EXPECT_EQ(backup->Push(PushOf(0, 3), &counters)->kind, PushOutcome::Kind::kDuplicate);
  // The step completes on both with worker 1's push, then one more step.
  for (TableChunk* t : {primary.get(), backup.get()}) {
    ASSERT_EQ(t->Push(PushOf(1, 3), &counters)->kind, PushOutcome::Kind::kApplied);
    for (int w = 0; w < 3; ++w) ASSERT_TRUE(t->Push(PushOf(w, 4), &counters).ok());
  }
  EXPECT_EQ(Read(*backup, AllIds()), Read(*primary, AllIds()));
  const TableState a = primary->Snapshot(), b = backup->Snapshot();
  ASSERT_EQ(a.rows.byte_size(), b.rows.byte_size());
  EXPECT_EQ(0, std::memcmp(a.row_updates.raw_data(), b.row_updates.raw_data(),
                           a.row_updates.byte_size()));
}

TEST(TableReplicaTest, MalformedStatesAreRefusedNotCrashedOn) {
  const JobConfig job = Job();
  auto primary = Table(job);
  ShardCounters counters;
  for (int w = 0; w < 3; ++w) ASSERT_TRUE(primary->Push(PushOf(w, 0), &counters).ok());
  ASSERT_TRUE(primary->Push(PushOf(0, 1), &counters).ok());  // pending
  TableState good = primary->Snapshot(/*replica=*/true);
  ASSERT_GT(good.ids.num_elements(), 0);
  // Fewer worker clocks than workers, or another optimizer's slots: kProtocol.
  TableState clocks = good;
  clocks.worker_clocks.pop_back();
  EXPECT_EQ(ThroughTheWire(clocks, job, primary->spec()).status().code(), StatusCode::kProtocol);
  TableState slots = good;
  slots.slots = 1;
  EXPECT_EQ(ThroughTheWire(slots, job, primary->spec()).status().code(), StatusCode::kProtocol);
  // Rows of another dim: read, then refused by the partition.
  TableState dim = good;
  dim.rows = Tensor::Zeros({dim.ids.num_elements(), 2});
  Result<TableState> read = ThroughTheWire(dim, job, primary->spec());
  ASSERT_TRUE(read.ok());
  auto backup = Table(job);
  EXPECT_EQ(backup->Restore(*read).code(), StatusCode::kCorruption);
  // A pending push of the wrong shape.
  TableState pending = good;
  Contribution bad = PushOf(1, 1);
  bad.gradient = RandomRows(1, kDim, 1);
  pending.pending[1] = bad;
  read = ThroughTheWire(pending, job, primary->spec());
  ASSERT_TRUE(read.ok());
  Status s = backup->Restore(*read);
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("pending push"), std::string::npos) << s.ToString();
  EXPECT_EQ(backup->rows_held(), 0) << "a refused state changes nothing";
}

}  // namespace
}  // namespace towerps::ps
