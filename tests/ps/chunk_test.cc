// The update rules of one chunk: sync (exact, order-independent, backups), async, SSP, and
// copy-on-write of values being sent (softsync: chunk_softsync_test.cc).
#include "ps/server/chunk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>

#include "tests/ps/chunk_test_util.h"

namespace towerps::ps {
namespace {

// A moving-average chunk (batch norm's statistics): the workers' pushed statistics are averaged
// in rank order, and the value moves toward that average with the variable's decay; the
// optimizer (here SGD at lr 0.5) plays no part.
TEST(ChunkSyncTest, MovingAverageChunkBlendsTheAveragedStatistic) {
  JobConfig config = Sgd(UpdateMode::kSync, 2);
  ChunkSpec spec = Spec();
  spec.kind = VariableKind::kMovingAverage;
  spec.decay = 0.9f;
  Chunk chunk(spec, config);
  ShardCounters counters;
  const Tensor init = Random(1);
  const Tensor s0 = Random(20), s1 = Random(21);
  ASSERT_TRUE(*chunk.Init(init));
  ASSERT_TRUE(chunk.Push(1, 0, 0, s1, &counters).ok());
  ASSERT_TRUE(chunk.Push(0, 0, 0, s0, &counters).ok());
  EXPECT_EQ(chunk.version(), 1);
  for (int64_t i = 0; i < kN; ++i) {
    const float mean = (s0.f32()[i] + s1.f32()[i]) * 0.5f;
    ASSERT_EQ(chunk.values().f32()[i], 0.9f * init.f32()[i] + (1.0f - 0.9f) * mean) << i;
  }
}

TEST(ChunkSyncTest, AveragesExactlyAndIsBitwiseIndependentOfArrivalOrder) {
  JobConfig config = Sgd(UpdateMode::kSync, 4);
  const Tensor init = Random(1);
  std::vector<Tensor> grads = {Random(10), Random(11), Random(12), Random(13)};
  std::vector<std::vector<float>> results;
  std::vector<int> order = {0, 1, 2, 3};
  std::mt19937 rng(5);
  for (int trial = 0; trial < 6; ++trial) {
    std::shuffle(order.begin(), order.end(), rng);
    Chunk chunk(Spec(), config);
    ShardCounters counters;
    ASSERT_TRUE(*chunk.Init(init));
    for (size_t i = 0; i < order.size(); ++i) {
      auto out = chunk.Push(order[i], 0, 0, grads[order[i]], &counters);
      ASSERT_TRUE(out.ok()) << out.status().ToString();
      EXPECT_EQ(out->kind,
                i + 1 < order.size() ? PushOutcome::Kind::kPending : PushOutcome::Kind::kApplied);
      EXPECT_EQ(chunk.PullReady(1, 0), i + 1 == order.size());
    }
    EXPECT_EQ(chunk.version(), 1);
    const float* v = chunk.values().f32();
    results.emplace_back(v, v + kN);
  }
  for (int64_t i = 0; i < kN; ++i) {
    // w - lr * ((g0 + g1 + g2 + g3) * 1/4), summed in rank order
    const float g =
        (((grads[0].f32()[i] + grads[1].f32()[i]) + grads[2].f32()[i]) + grads[3].f32()[i]) * 0.25f;
    ASSERT_EQ(results[0][i], init.f32()[i] - 0.5f * g) << i;
  }
  for (const auto& r : results) {
    EXPECT_EQ(std::memcmp(r.data(), results[0].data(), kN * 4), 0);
  }
}

TEST(ChunkSyncTest, BackupWorkersStepWithoutTheSlowestAndDropItsLateGradient) {
  JobConfig config = Sgd(UpdateMode::kSync, 4);
  config.replicas_to_aggregate = 3;
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  ASSERT_TRUE(*chunk.Init(Random(1)));
  for (int w : {2, 0, 1}) ASSERT_TRUE(chunk.Push(w, 0, 0, Random(20 + w), &counters).ok());
  EXPECT_EQ(chunk.version(), 1);  // stepped without worker 3
  auto late = chunk.Push(3, 0, 0, Random(23), &counters);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->kind, PushOutcome::Kind::kDropped);
  EXPECT_EQ(counters.stale_dropped.load(), 1u);
  EXPECT_EQ(counters.updates_applied.load(), 1u);
  EXPECT_EQ(chunk.version(), 1);
}

TEST(ChunkSyncTest, RejectsFutureStepsDifferingRepeatsAndBadSizes) {
  Chunk chunk(Spec(), Sgd(UpdateMode::kSync, 2));
  ShardCounters counters;
  EXPECT_EQ(chunk.Push(0, 0, 0, Random(1), &counters).status().code(),
            StatusCode::kFailedPrecondition);  // not initialised
  ASSERT_TRUE(*chunk.Init(Random(1)));
  EXPECT_FALSE(*chunk.Init(Random(2)));  // the first Init wins
  EXPECT_FALSE(chunk.Push(0, 5, 0, Random(1), &counters).ok());
  ASSERT_TRUE(chunk.Push(0, 0, 0, Random(1), &counters).ok());
  // A second gradient for the same step that differs, even in one bit, names the worker.
  Tensor flipped = Random(1);
  reinterpret_cast<uint32_t*>(flipped.raw_data())[kN / 2] ^= 1u;
  const auto differs = chunk.Push(0, 0, 0, flipped, &counters);
  ASSERT_FALSE(differs.ok());
  EXPECT_NE(differs.status().message().find("worker 0 pushed a gradient for step 0"),
            std::string::npos)
      << differs.status().ToString();
  EXPECT_FALSE(chunk.Push(7, 0, 0, Random(1), &counters).ok());
  EXPECT_FALSE(chunk.Push(1, 0, 0, Tensor::Empty({3}), &counters).ok());
  EXPECT_EQ(chunk.version(), 0);
}

// A restarted worker recomputes the step its predecessor did not finish and pushes it again:
// where the step is pending, the same bits are a duplicate (nothing changes); where it is
// applied, the push is dropped as stale; and the previous version's values stay readable for
// its exact pull until the chunk moves on once more.
TEST(ChunkSyncTest, RestartedWorkersRepeatedPushesAndThePreviousVersion) {
  Chunk chunk(Spec(), Sgd(UpdateMode::kSync, 2));
  ShardCounters counters;
  const Tensor init = Random(1);
  ASSERT_TRUE(*chunk.Init(init));
  EXPECT_EQ(chunk.ValuesAt(-1), nullptr);
  ASSERT_EQ(chunk.ValuesAt(0), &chunk.values());
  const Tensor g0 = Random(10), g1 = Random(11);
  ASSERT_EQ(chunk.Push(1, 0, 0, g1, &counters)->kind, PushOutcome::Kind::kPending);
  // Worker 1 dies; its successor pushes the same bits (a copy, as from a new process).
  auto repeat = chunk.Push(1, 0, 0, g1.Clone(), &counters);
  ASSERT_TRUE(repeat.ok()) << repeat.status().ToString();
  EXPECT_EQ(repeat->kind, PushOutcome::Kind::kDuplicate);
  EXPECT_EQ(chunk.version(), 0);
  ASSERT_EQ(chunk.Push(0, 0, 0, g0, &counters)->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(chunk.version(), 1);
  // The step was applied once: the average of g0 and g1, not of three gradients.
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(chunk.values().f32()[i], init.f32()[i] - 0.5f * ((g0.f32()[i] + g1.f32()[i]) * 0.5f))
        << i;
  }
  // Version 0 is still held, bit for bit, for a successor's exact pull.
  const Tensor* previous = chunk.ValuesAt(0);
  ASSERT_NE(previous, nullptr);
  EXPECT_EQ(std::memcmp(previous->raw_data(), init.raw_data(), kN * 4), 0);
  // A successor that pushes step 0 after it was applied is dropped, not applied twice.
  EXPECT_EQ(chunk.Push(0, 0, 0, g0.Clone(), &counters)->kind, PushOutcome::Kind::kDropped);
  EXPECT_EQ(counters.stale_dropped.load(), 2u);  // the duplicate and the stale repeat
  // After the next step, version 0 is gone; 1 is the previous one.
  ASSERT_TRUE(chunk.Push(0, 1, 1, Random(12), &counters).ok());
  ASSERT_TRUE(chunk.Push(1, 1, 1, Random(13), &counters).ok());
  EXPECT_EQ(chunk.ValuesAt(0), nullptr);
  EXPECT_NE(chunk.ValuesAt(1), nullptr);
  EXPECT_EQ(chunk.ValuesAt(2), &chunk.values());
}

// A worker that rejoined where its step cannot be recomputed bit for bit (a server came back
// from its checkpoint while another ran on) marks its first pushes `replace`: its earlier
// gradient still pending for the step is replaced, and the step averages the new one.
TEST(ChunkSyncTest, ReplacingPushSwapsTheWorkersPendingGradient) {
  Chunk chunk(Spec(), Sgd(UpdateMode::kSync, 2));
  ShardCounters counters;
  const Tensor init = Random(1);
  ASSERT_TRUE(*chunk.Init(init));
  const Tensor old1 = Random(10), new1 = Random(11), g0 = Random(12);
  ASSERT_EQ(chunk.Push(1, 0, 0, old1, &counters)->kind, PushOutcome::Kind::kPending);
  EXPECT_FALSE(chunk.Push(1, 0, 0, new1, &counters).ok());  // compared: differs
  auto replaced = chunk.Push(1, 0, 0, new1, &counters, /*replace=*/true);
  ASSERT_TRUE(replaced.ok()) << replaced.status().ToString();
  EXPECT_EQ(replaced->kind, PushOutcome::Kind::kPending);
  ASSERT_EQ(chunk.Push(0, 0, 0, g0, &counters)->kind, PushOutcome::Kind::kApplied);
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(chunk.values().f32()[i],
              init.f32()[i] - 0.5f * ((g0.f32()[i] + new1.f32()[i]) * 0.5f))
        << i;
  }
}

TEST(ChunkAsyncTest, AppliesEveryGradientAndRecordsStaleness) {
  JobConfig config = Sgd(UpdateMode::kAsync, 4);
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  const Tensor init = Random(1);
  ASSERT_TRUE(*chunk.Init(init));
  // All four computed from version 0; they arrive one after another.
  std::vector<float> expect(init.f32(), init.f32() + kN);
  for (int w = 0; w < 4; ++w) {
    Tensor g = Random(30 + w);
    auto out = chunk.Push(w, 0, 0, g, &counters);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->kind, PushOutcome::Kind::kApplied);
    EXPECT_EQ(out->staleness, w);
    for (int64_t i = 0; i < kN; ++i) expect[i] -= 0.5f * g.f32()[i];
  }
  EXPECT_EQ(chunk.version(), 4);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(counters.staleness[s].load(), 1u);
  for (int64_t i = 0; i < kN; ++i) ASSERT_NEAR(chunk.values().f32()[i], expect[i], 1e-5);
}

TEST(ChunkAsyncTest, StalenessAwareLearningRateDividesByStaleness) {
  JobConfig config = Sgd(UpdateMode::kAsync, 2);
  config.staleness_aware_lr = true;
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  Tensor zero = Tensor::Zeros({kN});
  zero.f32()[0] = 1.0f;  // w[0] = 1
  ASSERT_TRUE(*chunk.Init(zero));
  Tensor g = Tensor::Zeros({kN});
  g.f32()[0] = 1.0f;
  ASSERT_TRUE(chunk.Push(0, 0, 0, g, &counters).ok());  // staleness 0: lr 0.5
  EXPECT_FLOAT_EQ(chunk.values().f32()[0], 0.5f);
  ASSERT_TRUE(chunk.Push(1, 0, 0, g, &counters).ok());  // staleness 1: lr 0.5
  EXPECT_FLOAT_EQ(chunk.values().f32()[0], 0.0f);
  ASSERT_TRUE(chunk.Push(0, 0, 1, g, &counters).ok());  // staleness 2: lr 0.25
  EXPECT_FLOAT_EQ(chunk.values().f32()[0], -0.25f);
}

// A restarted async worker redoes the iteration its predecessor left half-pushed: a chunk that
// already applied that iteration of that worker drops the repeat, so none is applied twice; the
// worker's clock there is where its successor resumes.
TEST(ChunkAsyncTest, RepeatedIterationOfAWorkerIsDroppedNotAppliedTwice) {
  Chunk chunk(Spec(), Sgd(UpdateMode::kAsync, 2));
  ShardCounters counters;
  ASSERT_TRUE(*chunk.Init(Random(1)));
  ASSERT_EQ(chunk.Push(1, 0, 0, Random(2), &counters)->kind, PushOutcome::Kind::kApplied);
  ASSERT_EQ(chunk.Push(1, 1, 1, Random(3), &counters)->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(chunk.worker_clock(1), 2);
  EXPECT_EQ(chunk.worker_clock(0), 0);
  const std::vector<float> before(chunk.values().f32(), chunk.values().f32() + kN);
  auto repeat = chunk.Push(1, 2, 1, Random(4), &counters);  // iteration 1 again, other bits
  ASSERT_TRUE(repeat.ok());
  EXPECT_EQ(repeat->kind, PushOutcome::Kind::kDuplicate);
  EXPECT_EQ(chunk.version(), 2);
  EXPECT_EQ(counters.updates_applied.load(), 2u);
  EXPECT_EQ(std::memcmp(chunk.values().raw_data(), before.data(), kN * 4), 0);
  ASSERT_EQ(chunk.Push(1, 2, 2, Random(5), &counters)->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(chunk.worker_clock(1), 3);
}

TEST(ChunkSspTest, PullWaitsUntilTheSlowestIsWithinTheBound) {
  JobConfig config = Sgd(UpdateMode::kSsp, 2);
  config.staleness = 1;
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  ASSERT_TRUE(*chunk.Init(Random(1)));
  // Worker 0 runs ahead: clocks 0 and 1 pushed.
  ASSERT_TRUE(chunk.Push(0, 0, 0, Random(2), &counters).ok());
  EXPECT_TRUE(chunk.PullReady(0, 1));  // clock 1: slowest (0) >= 1 - 1
  ASSERT_TRUE(chunk.Push(0, 1, 1, Random(3), &counters).ok());
  EXPECT_FALSE(chunk.PullReady(0, 2));  // clock 2 needs worker 1 at clock >= 1
  ASSERT_TRUE(chunk.Push(1, 0, 0, Random(4), &counters).ok());
  EXPECT_TRUE(chunk.PullReady(0, 2));  // released as soon as the slow one catches up
  EXPECT_FALSE(chunk.PullReady(0, 3));
}

TEST(ChunkSspTest, ZeroBoundIsLockstep) {
  JobConfig config = Sgd(UpdateMode::kSsp, 3);
  config.staleness = 0;
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  ASSERT_TRUE(*chunk.Init(Random(1)));
  for (int w = 0; w < 3; ++w) {
    EXPECT_FALSE(chunk.PullReady(0, 1)) << "after " << w << " pushes";
    ASSERT_TRUE(chunk.Push(w, w, 0, Random(5 + w), &counters).ok());
  }
  EXPECT_TRUE(chunk.PullReady(0, 1));
}

// A gradient with a NaN or an infinity is refused in every mode, never touches the values, and
// still counts as its worker's push, so that nobody waits for a diverged worker.
Tensor WithNonFinite(uint32_t seed, int64_t at, float bad) {
  Tensor t = Random(seed);
  t.f32()[at] = bad;
  return t;
}

TEST(ChunkNonFiniteTest, SyncRefusesItAndStepsWithTheFiniteGradients) {
  JobConfig config = Sgd(UpdateMode::kSync, 3);
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  const Tensor init = Random(1);
  ASSERT_TRUE(*chunk.Init(init));
  const Tensor g0 = Random(10), g2 = Random(12);
  ASSERT_TRUE(chunk.Push(0, 0, 0, g0, &counters).ok());
  auto bad = chunk.Push(1, 0, 0, WithNonFinite(11, 17, NAN), &counters);
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_EQ(bad->kind, PushOutcome::Kind::kRejected);
  EXPECT_NE(bad->rejection.find("worker 1's gradient for variable 0 chunk 0 has nan at element 17"),
            std::string::npos)
      << bad->rejection;
  EXPECT_EQ(counters.nonfinite_rejected.load(), 1u);
  EXPECT_EQ(chunk.version(), 0);  // still waiting for worker 2
  EXPECT_EQ(std::memcmp(chunk.values().raw_data(), init.raw_data(), kN * 4), 0);
  // A second push from worker 1 for the step is still a duplicate.
  EXPECT_FALSE(chunk.Push(1, 0, 0, Random(13), &counters).ok());
  auto last = chunk.Push(2, 0, 0, g2, &counters);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(chunk.version(), 1);
  for (int64_t i = 0; i < kN; ++i) {
    // The average of the two finite gradients, in rank order.
    const float g = (g0.f32()[i] + g2.f32()[i]) * 0.5f;
    ASSERT_EQ(chunk.values().f32()[i], init.f32()[i] - 0.5f * g) << i;
  }
}

// The chunk may hold the only handle on a pending gradient (a received message's buffer): the
// step must read them before it lets them go (a sanitizer build catches a use after free).
TEST(ChunkSyncTest, AveragesGradientsThatOnlyTheChunkHolds) {
  Chunk chunk(Spec(), Sgd(UpdateMode::kSync, 2));
  ShardCounters counters;
  const Tensor init = Random(1);
  ASSERT_TRUE(*chunk.Init(init));
  const Tensor g0 = Random(20), g1 = Random(21);  // copies of what is pushed, for the check
  ASSERT_TRUE(chunk.Push(0, 0, 0, g0.Clone(), &counters).ok());
  ASSERT_TRUE(chunk.Push(1, 0, 0, g1.Clone(), &counters).ok());
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(chunk.values().f32()[i], init.f32()[i] - 0.5f * ((g0.f32()[i] + g1.f32()[i]) * 0.5f))
        << i;
  }
}

TEST(ChunkNonFiniteTest, SyncStepOfOnlyRefusedGradientsPassesWithoutAnUpdate) {
  Chunk chunk(Spec(), Sgd(UpdateMode::kSync, 2));
  ShardCounters counters;
  const Tensor init = Random(1);
  ASSERT_TRUE(*chunk.Init(init));
  ASSERT_EQ(chunk.Push(0, 0, 0, WithNonFinite(2, 0, INFINITY), &counters)->kind,
            PushOutcome::Kind::kRejected);
  auto out = chunk.Push(1, 0, 0, WithNonFinite(3, kN - 1, -INFINITY), &counters);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->kind, PushOutcome::Kind::kRejected);
  EXPECT_NE(out->rejection.find("-inf at element 999"), std::string::npos) << out->rejection;
  EXPECT_EQ(chunk.version(), 1);  // the step passed: the workers' pulls for it are answered
  EXPECT_TRUE(chunk.PullReady(1, 0));
  EXPECT_EQ(counters.updates_applied.load(), 0u);
  EXPECT_EQ(counters.nonfinite_rejected.load(), 2u);
  EXPECT_EQ(std::memcmp(chunk.values().raw_data(), init.raw_data(), kN * 4), 0);
}

TEST(ChunkNonFiniteTest, AsyncRefusesItAndTheVersionStillCountsThePush) {
  Chunk chunk(Spec(), Sgd(UpdateMode::kAsync, 2));
  ShardCounters counters;
  const Tensor init = Random(1);
  ASSERT_TRUE(*chunk.Init(init));
  int64_t clock = 0;
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    auto out = chunk.Push(1, chunk.version(), clock++, WithNonFinite(4, 500, bad), &counters);
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(out->kind, PushOutcome::Kind::kRejected);
  }
  EXPECT_EQ(chunk.version(), 3);  // what the chief's final pull waits for
  EXPECT_EQ(counters.updates_applied.load(), 0u);
  EXPECT_EQ(counters.nonfinite_rejected.load(), 3u);
  EXPECT_EQ(std::memcmp(chunk.values().raw_data(), init.raw_data(), kN * 4), 0);
  // A finite gradient afterwards is applied as usual.
  auto good = chunk.Push(0, 0, 0, Random(5), &counters);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(counters.updates_applied.load(), 1u);
}

TEST(ChunkNonFiniteTest, SspRefusalStillAdvancesTheWorkersClock) {
  JobConfig config = Sgd(UpdateMode::kSsp, 2);
  config.staleness = 0;
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  ASSERT_TRUE(*chunk.Init(Random(1)));
  ASSERT_TRUE(chunk.Push(0, 0, 0, Random(2), &counters).ok());
  EXPECT_FALSE(chunk.PullReady(0, 1));  // worker 1 has not pushed clock 0
  ASSERT_EQ(chunk.Push(1, 0, 0, WithNonFinite(3, 1, NAN), &counters)->kind,
            PushOutcome::Kind::kRejected);
  EXPECT_TRUE(chunk.PullReady(0, 1));  // worker 0 is not held back by the refused push
}

// A push's version and clock come from a peer: in every mode, one outside [0, kMaxCount] is
// refused by name, changes nothing and is not counted; an SSP pull's clock is compared without
// arithmetic that could overflow (the message fuzzer found both; UBSan runs this in the asan
// preset).
TEST(ChunkTest, OutOfRangeVersionsAndClocksAreRefusedInEveryMode) {
  for (UpdateMode mode :
       {UpdateMode::kSync, UpdateMode::kAsync, UpdateMode::kSsp, UpdateMode::kSoftsync}) {
    SCOPED_TRACE(std::string(kUpdateModes.Name(mode)));
    Chunk chunk(Spec(), Sgd(mode, 2));
    ShardCounters counters;
    ASSERT_TRUE(*chunk.Init(Random(1)));
    for (auto [version, clock, what] :
         {std::tuple{INT64_MIN, int64_t{0}, "version -9223372036854775808"},
          {int64_t{-1}, int64_t{0}, "version -1"},
          {int64_t{0}, INT64_MAX, "clock 9223372036854775807"},
          {int64_t{0}, int64_t{-3}, "clock -3"},
          {UpdateRule::kMaxCount + 1, int64_t{0}, "version 4611686018427387905"}}) {
      const Status s = chunk.Push(0, version, clock, Random(2), &counters).status();
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what;
      EXPECT_NE(s.message().find(what), std::string::npos) << s.ToString();
    }
    EXPECT_EQ(counters.gradients_received.load(), 0u);
    EXPECT_EQ(chunk.version(), 0);
    EXPECT_EQ(chunk.worker_clock(0), 0);
    EXPECT_FALSE(chunk.PullReady(INT64_MAX, 0));
    EXPECT_TRUE(chunk.PullReady(0, INT64_MIN));
    if (mode == UpdateMode::kSsp) {
      EXPECT_FALSE(chunk.PullReady(0, INT64_MAX));
    }
  }
}

// What a server checks of a checkpointed chunk before Restore: float32 values of the chunk's
// size and the job's optimizer's slots, each of that size.
TEST(ChunkTest, FitsChecksTheValuesAndTheOptimizersSlots) {
  JobConfig momentum = Sgd(UpdateMode::kSync, 1);
  momentum.optimizer.kind = OptimizerKind::kMomentum;
  Chunk chunk(Spec(), momentum);
  ASSERT_TRUE(*chunk.Init(Random(1)));
  const ChunkState good = chunk.Snapshot(false);
  EXPECT_TRUE(chunk.Fits(good));
  ChunkState no_slot = good;
  no_slot.slots.clear();
  ChunkState short_slot = good;
  short_slot.slots[0] = Tensor::Empty({kN - 1});
  ChunkState bytes = good;
  bytes.values = Tensor::Empty({kN}, DType::kUInt32);
  for (const ChunkState* bad : {&no_slot, &short_slot, &bytes}) EXPECT_FALSE(chunk.Fits(*bad));
  EXPECT_FALSE(Chunk(Spec(), Sgd(UpdateMode::kSync, 1)).Fits(good));  // SGD has no slot
}

TEST(ChunkTest, SharedValuesAreNeverOverwritten) {
  Chunk chunk(Spec(), Sgd(UpdateMode::kAsync, 1));
  ShardCounters counters;
  ASSERT_TRUE(*chunk.Init(Random(1)));
  Tensor sent = chunk.values();  // as if in flight to a worker
  std::vector<float> before(sent.f32(), sent.f32() + kN);
  ASSERT_TRUE(chunk.Push(0, 0, 0, Random(2), &counters).ok());
  EXPECT_NE(chunk.values().raw_data(), sent.raw_data());
  EXPECT_EQ(std::memcmp(sent.raw_data(), before.data(), kN * 4), 0);
  // Once released, the buffer is reused rather than reallocated.
  const void* old = sent.raw_data();
  sent = Tensor();
  Tensor hold = chunk.values();
  ASSERT_TRUE(chunk.Push(0, 1, 1, Random(3), &counters).ok());
  EXPECT_EQ(chunk.values().raw_data(), old);
}

}  // namespace
}  // namespace towerps::ps
