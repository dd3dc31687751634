// A chunk's replicated state (ps/server/replica_state.h): a backup restored from the primary's
// state in the middle of a step, sent through the wire encoding, continues bit for bit as the
// primary does; the same holds for momentum slots and the previous version. A malformed state is a
// kProtocol error, not a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "job/replica_placement.h"
#include "ps/server/chunk.h"
#include "ps/server/replica_state.h"
#include "tests/ps/received.h"

namespace towerps::ps {
namespace {

constexpr int64_t kN = 777;

Tensor Random(uint32_t seed) {
  Tensor t = Tensor::Empty({kN});
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < kN; ++i) t.f32()[i] = d(rng);
  return t;
}

JobConfig Job(UpdateMode mode) {
  JobConfig c;
  c.mode = mode;
  c.workers = 3;
  c.ps_replicas = 2;
  c.optimizer.kind = OptimizerKind::kMomentum;
  return c;
}

ChunkSpec Spec() { return {4, 2, 0, kN, kN * 4, 0}; }

// Encodes `state` as a replicate message and decodes it as the backup's server would.
Result<ChunkState> ThroughTheWire(const ChunkState& state, const JobConfig& job) {
  OutgoingMessage out(proto::MessageType::REPLICATE);
  out.header().setReplicaOp(proto::ReplicaOp::STATE);
  AddReplicaState(state, &out);
  TOWERPS_ASSIGN_OR_RETURN(IncomingMessage in, Received(out, "server:0"));
  return ReadReplicaState(in, Spec(), job);
}

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.num_elements() == b.num_elements() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

TEST(ReplicaStateTest, BackupRestoredMidStepFinishesItBitForBitAsThePrimary) {
  const JobConfig job = Job(UpdateMode::kSync);
  ShardCounters counters;
  Chunk primary(Spec(), job);
  ASSERT_TRUE(*primary.Init(Random(1)));
  for (int step = 0; step < 3; ++step) {  // momentum slots and a previous version to carry over
    for (int w = 0; w < 3; ++w) {
      ASSERT_TRUE(primary.Push(w, step, step, Random(10 * step + w), &counters).ok());
    }
  }
  // Step 3 half done: workers 2 and 0 pushed, worker 1 has not.
  ASSERT_TRUE(primary.Push(2, 3, 3, Random(32), &counters).ok());
  ASSERT_TRUE(primary.Push(0, 3, 3, Random(30), &counters).ok());

  Result<ChunkState> state = ThroughTheWire(primary.Snapshot(/*replica=*/true), job);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->pending.size(), 2u);
  Chunk backup(Spec(), job);
  backup.Restore(*state);
  ASSERT_EQ(backup.version(), 3);
  ASSERT_NE(backup.ValuesAt(2), nullptr);
  EXPECT_TRUE(SameBits(*backup.ValuesAt(2), *primary.ValuesAt(2)));
  // A repeated push of a pending gradient is a duplicate on both (it was carried over).
  EXPECT_EQ(backup.Push(0, 3, 3, Random(30), &counters)->kind, PushOutcome::Kind::kDuplicate);

  for (Chunk* c : {&primary, &backup}) {
    ASSERT_EQ(c->Push(1, 3, 3, Random(31), &counters)->kind, PushOutcome::Kind::kApplied);
    ASSERT_TRUE(c->Push(0, 4, 4, Random(40), &counters).ok());
    ASSERT_TRUE(c->Push(1, 4, 4, Random(41), &counters).ok());
    ASSERT_TRUE(c->Push(2, 4, 4, Random(42), &counters).ok());
  }
  EXPECT_EQ(primary.version(), 5);
  EXPECT_TRUE(SameBits(primary.values(), backup.values()));
  EXPECT_TRUE(SameBits(primary.Snapshot().slots[0], backup.Snapshot().slots[0]));
}

// A replicated sync chunk forms each step's sum and applies the update from it; its backup
// applies the same sums. Both must hold exactly the bits of the fused update (no sum formed),
// with weight decay, momentum, and a step where one gradient is refused as non-finite.
TEST(ReplicaStateTest, StepSumsGiveTheFusedUpdatesBitsOnPrimaryAndBackup) {
  JobConfig job = Job(UpdateMode::kSync);
  job.optimizer.weight_decay = 0.01f;
  ShardCounters counters;
  Chunk fused(Spec(), job), primary(Spec(), job), backup(Spec(), job);
  std::vector<std::pair<Tensor, int>> sums;
  primary.set_step_hook([&](int64_t step, const std::vector<Tensor>& sum, int k) {
    EXPECT_EQ(step, static_cast<int64_t>(sums.size()));
    ASSERT_EQ(sum.size(), 1u);
    sums.emplace_back(sum[0], k);
  });
  for (Chunk* c : {&fused, &primary, &backup}) ASSERT_TRUE(*c->Init(Random(1)));
  Tensor nan = Random(99);
  nan.f32()[5] = std::nanf("");
  for (int step = 0; step < 5; ++step) {
    for (int w : {2, 0, 1}) {
      const Tensor g = step == 3 && w == 1 ? nan : Random(100 * step + w);
      ASSERT_TRUE(fused.Push(w, step, step, g, &counters).ok());
      ASSERT_TRUE(primary.Push(w, step, step, g, &counters).ok());
    }
    ASSERT_EQ(sums.size(), static_cast<size_t>(step + 1));
    ASSERT_TRUE(backup.ApplyStep(step, sums.back().first, sums.back().second, &counters).ok());
  }
  EXPECT_EQ(sums[3].second, 2);
  EXPECT_TRUE(SameBits(fused.values(), primary.values()));
  EXPECT_TRUE(SameBits(fused.values(), backup.values()));
  EXPECT_TRUE(SameBits(fused.Snapshot().slots[0], backup.Snapshot().slots[0]));
  EXPECT_TRUE(SameBits(*fused.ValuesAt(4), *backup.ValuesAt(4)));
  // A replayed step that does not follow on is an error, not a silent divergence.
  EXPECT_FALSE(backup.ApplyStep(7, sums[0].first, 3, &counters).ok());
}

TEST(ReplicaStateTest, AsyncStateCarriesEachWorkersClock) {
  const JobConfig job = Job(UpdateMode::kAsync);
  ShardCounters counters;
  Chunk primary(Spec(), job);
  ASSERT_TRUE(*primary.Init(Random(1)));
  ASSERT_TRUE(primary.Push(1, 0, 0, Random(2), &counters).ok());
  ASSERT_TRUE(primary.Push(1, 1, 1, Random(3), &counters).ok());
  Result<ChunkState> state = ThroughTheWire(primary.Snapshot(true), job);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  Chunk backup(Spec(), job);
  backup.Restore(*state);
  EXPECT_EQ(backup.worker_clock(1), 2);
  // Worker 1 redoing iteration 1 is dropped on the backup too: applied once.
  EXPECT_EQ(backup.Push(1, 1, 1, Random(3), &counters)->kind, PushOutcome::Kind::kDuplicate);
  EXPECT_TRUE(SameBits(primary.values(), backup.values()));
}

TEST(ReplicaStateTest, UninitialisedChunkTravelsWithoutTensors) {
  const JobConfig job = Job(UpdateMode::kSync);
  Chunk primary(Spec(), job);
  Result<ChunkState> state = ThroughTheWire(primary.Snapshot(true), job);
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  EXPECT_EQ(state->version, kNoVersion);
  // A backup restored from it has no values either (before, Restore copied from no tensor).
  Chunk backup(Spec(), job);
  backup.Restore(*state);
  EXPECT_FALSE(backup.initialized());
  ShardCounters counters;
  EXPECT_EQ(backup.Push(0, 0, 0, Random(2), &counters).status().code(),
            StatusCode::kFailedPrecondition);
}

TEST(ReplicaStateTest, MalformedStatesAreProtocolErrors) {
  const JobConfig job = Job(UpdateMode::kSync);
  ShardCounters counters;
  Chunk primary(Spec(), job);
  ASSERT_TRUE(*primary.Init(Random(1)));
  ASSERT_TRUE(primary.Push(0, 0, 0, Random(2), &counters).ok());
  const ChunkState good = primary.Snapshot(true);

  ChunkState missing_slot = good;
  missing_slot.slots.clear();
  ChunkState wrong_size = good;
  wrong_size.values = Tensor::Empty({kN - 1});
  ChunkState bad_rank = good;
  bad_rank.pending = {{7, Random(3)}};
  ChunkState few_clocks = good;
  few_clocks.worker_clocks.pop_back();
  ChunkState future_previous = good;
  future_previous.previous_version = 5;
  future_previous.previous_values = Random(4);
  // Counts a rule could not step from without overflowing (UpdateRule::CountsInRange).
  ChunkState huge_updates = good;
  huge_updates.updates = INT64_MAX;
  ChunkState huge_clock = good;
  huge_clock.worker_clocks[1] = INT64_MAX;
  ChunkState huge_version = good;
  huge_version.version = INT64_MAX;
  huge_version.previous_version = kNoVersion;
  huge_version.previous_values = Tensor();
  for (const ChunkState* s : {&missing_slot, &wrong_size, &bad_rank, &few_clocks, &future_previous,
                              &huge_updates, &huge_clock, &huge_version}) {
    Result<ChunkState> r = ThroughTheWire(*s, job);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kProtocol) << r.status().ToString();
  }
}

}  // namespace
}  // namespace towerps::ps
