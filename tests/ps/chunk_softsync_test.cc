// n-softsync's update rule (Zhang et al. 2016) on one chunk: 1-softsync is hardsync and
// workers-softsync is async, bit for bit; late gradients join the next update once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "ps/server/chunk.h"
#include "tests/ps/chunk_test_util.h"

namespace towerps::ps {
namespace {

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.num_elements() == b.num_elements() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

JobConfig Softsync(int workers, int n) {
  JobConfig c = Sgd(UpdateMode::kSoftsync, workers);
  c.optimizer.kind = OptimizerKind::kMomentum;  // state across updates: a stronger comparison
  c.softsync_n = n;
  return c;
}

// 1-softsync: each update averages all the workers' gradients, in worker-rank order, whatever
// order they arrive in: hardsync's update, bit for bit, step after step.
TEST(ChunkSoftsyncTest, OneSoftsyncIsHardsyncBitForBit) {
  JobConfig sync_config = Softsync(4, 1);
  sync_config.mode = UpdateMode::kSync;
  Chunk sync(Spec(), sync_config), soft(Spec(), Softsync(4, 1));
  ShardCounters counters;
  ASSERT_TRUE(*sync.Init(Random(1)));
  ASSERT_TRUE(*soft.Init(Random(1)));
  std::mt19937 rng(5);
  for (int64_t step = 0; step < 6; ++step) {
    std::vector<int> order = {0, 1, 2, 3};
    std::shuffle(order.begin(), order.end(), rng);
    for (int w : order) {
      const Tensor g = Random(static_cast<uint32_t>(100 + 10 * step + w));
      ASSERT_TRUE(sync.Push(w, step, step, g, &counters).ok());
      Result<PushOutcome> out = soft.Push(w, step, step, g, &counters);
      ASSERT_TRUE(out.ok()) << out.status();
      EXPECT_EQ(out->kind,
                w == order.back() ? PushOutcome::Kind::kApplied : PushOutcome::Kind::kPending);
    }
    ASSERT_EQ(soft.version(), sync.version());
    ASSERT_TRUE(SameBits(soft.values(), sync.values())) << "step " << step;
  }
}

// n-softsync with n = workers applies each gradient on arrival with its staleness: async's
// update, bit for bit, with the staleness-aware rate too.
TEST(ChunkSoftsyncTest, WorkersSoftsyncIsAsyncBitForBit) {
  for (bool aware : {false, true}) {
    JobConfig soft_config = Softsync(3, 3);
    soft_config.staleness_aware_lr = aware;
    JobConfig async_config = soft_config;
    async_config.mode = UpdateMode::kAsync;
    Chunk async(Spec(), async_config), soft(Spec(), soft_config);
    ShardCounters a_counters, s_counters;
    ASSERT_TRUE(*async.Init(Random(2)));
    ASSERT_TRUE(*soft.Init(Random(2)));
    // (worker, base version) in arrival order: stale by 0, 1 or 2 versions.
    const std::vector<std::pair<int, int64_t>> pushes = {{0, 0}, {1, 0}, {2, 0}, {0, 1},
                                                         {2, 3}, {1, 2}, {0, 4}, {1, 6}};
    std::vector<int64_t> clocks(3, 0);
    for (size_t i = 0; i < pushes.size(); ++i) {
      const auto [w, base] = pushes[i];
      const Tensor g = Random(static_cast<uint32_t>(200 + i));
      Result<PushOutcome> a = async.Push(w, base, clocks[w], g, &a_counters);
      Result<PushOutcome> s = soft.Push(w, base, clocks[w], g, &s_counters);
      ++clocks[w];
      ASSERT_TRUE(a.ok() && s.ok());
      EXPECT_EQ(s->kind, PushOutcome::Kind::kApplied);
      EXPECT_EQ(s->staleness, a->staleness) << i;
      ASSERT_TRUE(SameBits(soft.values(), async.values())) << "push " << i << " aware " << aware;
    }
    for (int b = 0; b < kStalenessBuckets; ++b) {
      EXPECT_EQ(s_counters.staleness[b].load(), a_counters.staleness[b].load()) << b;
    }
  }
}

// 2-softsync of 4 workers: each update averages the first 2 gradients to arrive, whatever their
// version; a late gradient is not dropped but joins the next update, once, with its staleness;
// its repeat (a restarted worker) is a duplicate, pending or applied.
TEST(ChunkSoftsyncTest, LateGradientsJoinTheNextUpdateOnceWithTheirStaleness) {
  JobConfig config = Softsync(4, 2);
  config.optimizer.kind = OptimizerKind::kSgd;
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  const Tensor init = Random(3);
  ASSERT_TRUE(*chunk.Init(init));
  const Tensor g0 = Random(30), g1 = Random(31), g2 = Random(32), g3 = Random(33);
  EXPECT_EQ(chunk.Push(0, 0, 0, g0, &counters)->kind, PushOutcome::Kind::kPending);
  EXPECT_EQ(chunk.Push(1, 0, 0, g1, &counters)->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(chunk.version(), 1);
  const Tensor after_first = chunk.values().Clone();
  // Worker 2 computed from version 0 and arrives late; worker 3 from version 1.
  EXPECT_EQ(chunk.Push(2, 0, 0, g2, &counters)->kind, PushOutcome::Kind::kPending);
  EXPECT_EQ(chunk.Push(2, 0, 0, g2, &counters)->kind, PushOutcome::Kind::kDuplicate);
  Result<PushOutcome> last = chunk.Push(3, 1, 0, g3, &counters);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(last->staleness, 0);
  EXPECT_EQ(chunk.version(), 2);
  EXPECT_EQ(chunk.Push(2, 0, 0, g2, &counters)->kind, PushOutcome::Kind::kDuplicate);
  EXPECT_EQ(chunk.worker_clock(2), 1);
  for (int64_t i = 0; i < kN; ++i) {
    const float first = init.f32()[i] - 0.5f * ((g0.f32()[i] + g1.f32()[i]) * 0.5f);
    ASSERT_EQ(after_first.f32()[i], first) << i;
    const float second = first - 0.5f * ((g2.f32()[i] + g3.f32()[i]) * 0.5f);
    ASSERT_EQ(chunk.values().f32()[i], second) << i;
  }
  // Staleness: 0 and 0 in the first update; 1 (worker 2, from version 0 at version 1) and 0.
  EXPECT_EQ(counters.staleness[0].load(), 3u);
  EXPECT_EQ(counters.staleness[1].load(), 1u);
  EXPECT_EQ(counters.updates_applied.load(), 2u);
  EXPECT_EQ(counters.stale_dropped.load(), 2u);  // the two repeats, nothing else
}

// A checkpoint may hold a version up to UpdateRule::kMaxCount, so one update's staleness sum can
// pass int64 (each gradient 2^62 stale here): it is summed in double (UBSan ran this in the
// asan preset and caught the overflow before).
TEST(ChunkSoftsyncTest, StalenessSumOfAHugeVersionDoesNotOverflow) {
  JobConfig config = Softsync(2, 1);
  config.staleness_aware_lr = true;
  Chunk chunk(Spec(), config);
  ShardCounters counters;
  ASSERT_TRUE(*chunk.Init(Random(1)));
  ChunkState far = chunk.Snapshot(false);
  far.version = UpdateRule::kMaxCount;
  chunk.Restore(far);
  ASSERT_TRUE(chunk.Push(0, 0, 0, Random(2), &counters).ok());
  Result<PushOutcome> out = chunk.Push(1, 0, 0, Random(3), &counters);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->kind, PushOutcome::Kind::kApplied);
  EXPECT_EQ(out->staleness, UpdateRule::kMaxCount);
  EXPECT_EQ(chunk.version(), UpdateRule::kMaxCount + 1);
}

}  // namespace
}  // namespace towerps::ps
