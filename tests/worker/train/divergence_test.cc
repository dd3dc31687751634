// The chief's summary of the servers' reports. The first divergence of a job: each shard keeps the
// earliest non-finite gradient it refused (by the worker's iteration, then its rank) whatever order
// the pushes come in, the servers' reports combine to the earliest, and the chief's summary names
// that worker and its step unless its own divergence came first.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "ps/server/server_stats.h"
#include "worker/train/divergence.h"
#include "worker/train/summary.h"

namespace towerps::worker {
namespace {

using ps::FirstNonFinite;

TEST(FirstNonFiniteTest, TheKeyOrdersByIterationThenRankAndRoundTrips) {
  EXPECT_LT(FirstNonFinite::Key(3, 7), FirstNonFinite::Key(4, 0));
  EXPECT_LT(FirstNonFinite::Key(3, 1), FirstNonFinite::Key(3, 2));
  const FirstNonFinite f = FirstNonFinite::FromKey(FirstNonFinite::Key(123456789, 31));
  EXPECT_EQ(f.worker, 31);
  EXPECT_EQ(f.step, 123456790) << "a step is the iteration + 1";
  EXPECT_EQ(FirstNonFinite::FromKey(FirstNonFinite::kNone).worker, -1);
}

TEST(FirstNonFiniteTest, ShardsKeepTheEarliestRefusalWhateverTheOrder) {
  std::vector<std::pair<int64_t, int>> pushes;  // (iteration, worker)
  for (int w = 0; w < 8; ++w)
    for (int64_t it = 40; it < 60; ++it) pushes.push_back({it + (w == 5 ? -3 : 0), w});
  std::shuffle(pushes.begin(), pushes.end(), std::mt19937(7));
  ps::ShardCounters counters;
  std::vector<std::thread> threads;  // several tower threads' pushes at once
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < pushes.size(); i += 4)
        counters.NoteNonFinite(pushes[i].first, pushes[i].second);
    });
  }
  for (auto& t : threads) t.join();
  const FirstNonFinite f = FirstNonFinite::FromKey(counters.first_nonfinite.load());
  EXPECT_EQ(f.worker, 5);
  EXPECT_EQ(f.step, 38);
}

TEST(FirstNonFiniteTest, TheEarlierOfTwoReportsAndNoneIsLatest) {
  const FirstNonFinite none, a{.worker = 3, .step = 10}, b{.worker = 1, .step = 10},
      c{.worker = 0, .step = 12};
  EXPECT_EQ(FirstNonFinite::Earlier(none, a).worker, 3);
  EXPECT_EQ(FirstNonFinite::Earlier(a, none).worker, 3);
  EXPECT_EQ(FirstNonFinite::Earlier(a, b).worker, 1) << "the same step: the lower rank";
  EXPECT_EQ(FirstNonFinite::Earlier(c, a).worker, 3);
}

TrainingSummary ChiefSummary(const std::vector<FirstNonFinite>& servers) {
  TrainingSummary s;
  for (const FirstNonFinite& f : servers) {
    ps::ServerStatsReport r;
    r.first_nonfinite = f;
    r.nonfinite_rejected = f.worker >= 0 ? 1 : 0;
    AddServerStats(r, &s);
  }
  return s;
}

TEST(AdoptFirstDivergenceTest, AnotherWorkersEarlierRefusalNamesThatWorker) {
  TrainingSummary s = ChiefSummary({{.worker = 6, .step = 90}, {}, {.worker = 2, .step = 75}});
  Divergence chief(OnNonFinite::kContinue, /*rank=*/0, {"w"});
  EXPECT_FALSE(chief.StopsOnCollapse("the loss sat at ln 10", 140));
  chief.Fill(&s);
  AdoptFirstDivergence(&s);
  EXPECT_TRUE(s.diverged);
  EXPECT_EQ(s.divergence_kind, "nonfinite");
  EXPECT_EQ(s.diverged_at_step, 75);
  EXPECT_EQ(s.diverged_worker, 2);
  EXPECT_NE(s.divergence.find("worker:2"), std::string::npos) << s.divergence;
  const std::string json = SummaryJson(s, ps::JobConfig{}, 0, RunRecord{});
  EXPECT_NE(json.find("\"diverged_at_step\":75,\"diverged_worker\":\"worker:2\""),
            std::string::npos)
      << json;
}

TEST(AdoptFirstDivergenceTest, TheChiefsOwnEarlierDivergenceStays) {
  TrainingSummary s = ChiefSummary({{.worker = 2, .step = 75}});
  Divergence chief(OnNonFinite::kContinue, /*rank=*/0, {"w"});
  EXPECT_FALSE(chief.StopsOnCollapse("the loss sat at ln 10", 60));
  chief.Fill(&s);
  AdoptFirstDivergence(&s);
  EXPECT_EQ(s.divergence_kind, "collapse");
  EXPECT_EQ(s.diverged_at_step, 60);
  EXPECT_EQ(s.diverged_worker, 0);
}

TEST(AdoptFirstDivergenceTest, NothingRefusedLeavesASoundJobSound) {
  TrainingSummary s = ChiefSummary({{}, {}});
  Divergence(OnNonFinite::kFail, 0, {"w"}).Fill(&s);
  AdoptFirstDivergence(&s);
  EXPECT_FALSE(s.diverged);
  EXPECT_EQ(s.diverged_worker, -1);
  const std::string json = SummaryJson(s, ps::JobConfig{}, 0, RunRecord{});
  EXPECT_NE(json.find("\"diverged_at_step\":null,\"diverged_worker\":null"), std::string::npos)
      << json;
}

// Staleness past the histogram's last bucket (32 workers reach it): the mean comes from the
// servers' exact sum, not the clamped buckets, and the largest is kept.
TEST(StalenessStatsTest, TheMeanIsExactPastTheHistogramsLastBucket) {
  ps::ShardCounters a, b;
  for (int64_t s : {0, 10, 100}) a.RecordStaleness(s);
  b.RecordStaleness(200);
  TrainingSummary summary;
  for (const ps::ShardCounters* c : {&a, &b}) {
    ps::ServerStatsReport r;
    for (const auto& bucket : c->staleness) r.staleness_histogram.push_back(bucket.load());
    r.staleness_sum = c->staleness_sum.load();
    r.staleness_max = c->staleness_max.load();
    AddServerStats(r, &summary);
  }
  FinishStalenessStats(&summary);
  EXPECT_DOUBLE_EQ(summary.mean_staleness, (0 + 10 + 100 + 200) / 4.0);
  EXPECT_EQ(summary.max_staleness, 200u);
  EXPECT_EQ(summary.p99_staleness, ps::kStalenessBuckets - 1) << "the histogram's last bucket";
  const std::string json = SummaryJson(summary, ps::JobConfig{}, 0, RunRecord{});
  EXPECT_NE(json.find("\"max_staleness\":200"), std::string::npos) << json;
}

}  // namespace
}  // namespace towerps::worker
