// Every update mode, driven through a Chunk by a seeded random interleaving of 4 workers that
// pull and push as real ones do, with restarted workers' repeated pushes and non-finite
// gradients mixed in. Each trace's result (the final values' bits, version, update count,
// counters, staleness histogram and every push's outcome) is pinned to the digest that the
// per-mode switch in Chunk::Push gave before the update rules were split out of it
// (ps/server/update_rule.h): the redesign changed no bit, no count and no staleness, and a later
// change that does fails here, printing what it now gets.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <random>
#include <sstream>
#include <string>

#include "common/hash.h"
#include "ps/server/chunk.h"
#include "tests/ps/chunk_test_util.h"

namespace towerps::ps {
namespace {

struct TraceCase {
  const char* name;
  UpdateMode mode;
  int replicas = 0;  // sync: --replicas-to-aggregate (0: all)
  int staleness = 0;
  int softsync_n = 1;
  bool staleness_aware = false;
  uint64_t digest;  // of the pre-redesign Chunk
};

struct Worker {
  int64_t base = 0;   // the version it pulled
  int64_t clock = 0;  // its next iteration
  bool pushed = false;
  Tensor last;  // its last gradient, for a restarted worker's repeat
};

// Runs 600 events and returns a digest of everything observable, with `detail` describing it.
// The pinned digests predate --lr-scaling: they are of --lr-scaling none, which `adjust` may
// change.
uint64_t RunTrace(const TraceCase& c, std::string* detail,
                  const std::function<void(JobConfig&)>& adjust = nullptr) {
  JobConfig config = Sgd(c.mode, 4);
  config.optimizer.kind = OptimizerKind::kMomentum;
  config.optimizer.momentum = 0.9f;
  config.optimizer.learning_rate = 0.05f;
  config.schedule.kind = LrScheduleKind::kExponential;
  config.schedule.decay_rate = 0.5f;
  config.schedule.decay_steps = 20;
  config.replicas_to_aggregate = c.replicas;
  config.staleness = c.staleness;
  config.softsync_n = c.softsync_n;
  config.staleness_aware_lr = c.staleness_aware;
  config.lr_scaling = LrScaling::kNone;
  if (adjust) adjust(config);
  Chunk chunk(Spec(), config);
  EXPECT_TRUE(chunk.Init(Random(99)).ok());
  ShardCounters counters;
  std::vector<Worker> workers(4);
  std::mt19937 rng(1234);
  uint64_t h = kFnv1aOffsetBasis;
  int repeats = 0, refused_sent = 0;
  const bool sync = c.mode == UpdateMode::kSync;
  for (int event = 0; event < 600; ++event) {
    const int w = static_cast<int>(rng() % 4);
    Worker& me = workers[static_cast<size_t>(w)];
    if (me.pushed) {  // waiting for its next pull
      const int64_t min_version = sync ? me.base + 1 : 0;
      if (chunk.PullReady(min_version, me.clock)) {
        me.base = chunk.version();
        me.pushed = false;
      }
      h = Fnv1aU64(static_cast<uint64_t>(me.pushed), h);
      continue;
    }
    Tensor g = Random(static_cast<uint32_t>(event * 7 + w));
    if (rng() % 30 == 0) {
      g.f32()[7] = std::nanf("");
      ++refused_sent;
    }
    Result<PushOutcome> r = chunk.Push(w, me.base, me.clock, g, &counters);
    if (!r.ok()) {
      *detail = "event " + std::to_string(event) + ": " + r.status().message();
      return 0;
    }
    h = Fnv1aU64(static_cast<uint64_t>(r->kind), h);
    h = Fnv1aU64(static_cast<uint64_t>(r->staleness), h);
    h = Fnv1aU64(static_cast<uint64_t>(r->version), h);
    me.last = g;
    ++me.clock;
    me.pushed = true;
    if (rng() % 20 == 0) {  // a restarted worker pushes its last iteration again
      ++repeats;
      Result<PushOutcome> again = chunk.Push(w, me.base, me.clock - 1, me.last, &counters);
      h = Fnv1aU64(again.ok() ? static_cast<uint64_t>(again->kind) : 99u, h);
    }
  }
  const Tensor& v = chunk.values();
  h = Fnv1a(v.raw_data(), v.byte_size(), h);
  std::ostringstream d;
  d << "version " << chunk.version() << ", updates " << counters.updates_applied.load()
    << ", received " << counters.gradients_received.load() << ", dropped "
    << counters.stale_dropped.load() << ", refused " << counters.nonfinite_rejected.load() << " ("
    << refused_sent << " sent non-finite, " << repeats << " repeats), staleness";
  for (int b = 0; b < kStalenessBuckets; ++b) {
    const uint64_t n = counters.staleness[static_cast<size_t>(b)].load();
    h = Fnv1aU64(n, h);
    if (n > 0) d << " " << b << ":" << n;
  }
  h = Fnv1aU64(static_cast<uint64_t>(chunk.version()), h);
  h = Fnv1aU64(counters.updates_applied.load(), h);
  h = Fnv1aU64(counters.stale_dropped.load(), h);
  h = Fnv1aU64(counters.nonfinite_rejected.load(), h);
  d << ", values[0] " << v.f32()[0];
  *detail = d.str();
  return h;
}

void PrintTo(const TraceCase& c, std::ostream* os) { *os << c.name; }

class UpdateRuleTraceTest : public ::testing::TestWithParam<TraceCase> {};

TEST_P(UpdateRuleTraceTest, MatchesTheDigestOfThePreRedesignChunk) {
  std::string detail;
  const uint64_t digest = RunTrace(GetParam(), &detail);
  EXPECT_EQ(digest, GetParam().digest)
      << GetParam().name << ": " << detail << "; digest 0x" << std::hex << digest;
  // The trace must mean something: updates happened and gradients were refused.
  EXPECT_NE(detail.find("version"), std::string::npos) << detail;
}

INSTANTIATE_TEST_SUITE_P(
    EveryMode, UpdateRuleTraceTest,
    ::testing::Values(
        TraceCase{"sync", UpdateMode::kSync, 0, 0, 1, false, 0x9fb866dff8ca4100},
        TraceCase{"sync_backup", UpdateMode::kSync, 3, 0, 1, false, 0x4546d40c045f5c1f},
        TraceCase{"async", UpdateMode::kAsync, 0, 0, 1, false, 0xce4e062bf8bb7e22},
        TraceCase{"async_aware", UpdateMode::kAsync, 0, 0, 1, true, 0xe61488e8389b8fe1},
        TraceCase{"ssp", UpdateMode::kSsp, 0, 2, 1, false, 0x3046f34bf8e1edca},
        TraceCase{"softsync_1", UpdateMode::kSoftsync, 0, 0, 1, false, 0xa0e2089b8860484e},
        TraceCase{"softsync_2_aware", UpdateMode::kSoftsync, 0, 0, 2, true, 0x4fa7963a25762560},
        TraceCase{"softsync_4", UpdateMode::kSoftsync, 0, 0, 4, false, 0xda09b6fff4397273}),
    [](const ::testing::TestParamInfo<TraceCase>& info) { return std::string(info.param.name); });

// --lr-scaling share is --lr-scaling none at the rate times the share of a step's gradients an
// update holds (1/4 in async and SSP with 4 workers, 1/n in n-softsync, 1 in sync), with the
// schedule counting steps instead of updates: the same bits, in every mode. (Staircase decay,
// so that steps = updates / UpdatesPerStep() floors the same way; factors of 1/2^k, exact.)
// Plain SGD: under share, momentum is also traded for rate in a stale mode
// (JobConfig::UpdateOptimizer, whose formula job_config_test checks), which none does not do.
TEST_P(UpdateRuleTraceTest, ShareScalingIsNoneAtTheSharedRateAndSchedule) {
  const TraceCase& c = GetParam();
  JobConfig probe = Sgd(c.mode, 4);
  probe.softsync_n = c.softsync_n;
  const int per_step = probe.UpdatesPerStep();
  std::string share_detail, none_detail, unscaled_detail;
  const uint64_t share = RunTrace(c, &share_detail, [&](JobConfig& j) {
    j.lr_scaling = LrScaling::kShare;
    j.optimizer.kind = OptimizerKind::kSgd;
    j.schedule.staircase = true;
  });
  const uint64_t none = RunTrace(c, &none_detail, [&](JobConfig& j) {
    j.optimizer.kind = OptimizerKind::kSgd;
    j.optimizer.learning_rate /= static_cast<float>(per_step);
    j.schedule.decay_steps *= per_step;
    j.schedule.staircase = true;
  });
  EXPECT_EQ(share, none) << c.name << ": share " << share_detail << "; none " << none_detail;
  // And it is a change wherever an update holds less than a step: the test can fail.
  const uint64_t unscaled = RunTrace(c, &unscaled_detail, [](JobConfig& j) {
    j.optimizer.kind = OptimizerKind::kSgd;
    j.schedule.staircase = true;
  });
  if (per_step > 1) {
    EXPECT_NE(share, unscaled) << c.name;
  } else {
    EXPECT_EQ(share, unscaled) << c.name;
  }
}

}  // namespace
}  // namespace towerps::ps
