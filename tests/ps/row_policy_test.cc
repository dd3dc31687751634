// A table partition under a policy (ps/server/row_policy.h through ps/server/table_chunk.h):
// admission after exactly min_count steps, the hash coin, TTL and capacity eviction removing
// exactly the documented rows (against a reference model of the rule), evicted ids coming back
// at their initial values, the previous version of an evicted row for a restarted worker, and a
// restored partition continuing bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "tests/ps/table_test_util.h"

namespace towerps::ps {
namespace {

using testing::Ids;
using testing::MakeTable;
using testing::RandomRows;
using testing::Read;
using testing::RowsOf;
using testing::TableJob;

// A sync job of one worker: every push is a step.
JobConfig PolicyJob(const TablePolicy& policy) {
  JobConfig job = TableJob(UpdateMode::kSync, 1, TableOptimizerKind::kAdagrad);
  job.table_policies.defaults = policy;
  return job;
}

// Worker 0's push of step `t->version()` for `ids` (sorted), gradients from `seed`.
void Step(TableChunk& t, const std::vector<uint64_t>& ids, uint32_t seed) {
  ShardCounters counters;
  const int64_t v = t.version();
  Result<PushOutcome> r = t.Push(
      RowsOf(0, v, v, ids, RandomRows(static_cast<int64_t>(ids.size()), 4, seed)), &counters);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(t.version(), v + 1);
}

std::set<uint64_t> Held(const TableChunk& t) {
  const TableState s = t.Snapshot();
  return std::set<uint64_t>(s.ids.u64(), s.ids.u64() + s.ids.num_elements());
}

TEST(RowPolicyTest, AnIdGetsItsRowAtTheStepThatBringsItsCountToMinCount) {
  TablePolicy policy;
  policy.admission_min_count = 3;
  auto t = MakeTable(PolicyJob(policy), 4);
  auto fresh = MakeTable(PolicyJob(TablePolicy{}), 4);
  const std::vector<float> initial = Read(*fresh, {5});
  Step(*t, {5, 6}, 1);
  Step(*t, {5}, 2);
  EXPECT_EQ(t->rows_held(), 0);
  EXPECT_EQ(t->pending_admission(), 2);
  EXPECT_EQ(t->policy_counts().dropped_gradients, 3);
  EXPECT_EQ(Read(*t, {5}), initial) << "an id pending admission reads its initial values";
  Step(*t, {5}, 3);  // the third step: admitted, and this step's gradient applies
  EXPECT_EQ(Held(*t), std::set<uint64_t>({5}));
  EXPECT_EQ(t->pending_admission(), 1);
  EXPECT_EQ(t->policy_counts().admitted, 1);
  // The same bits as a table without a policy given only that third gradient.
  Step(*fresh, {5}, 3);
  EXPECT_EQ(Read(*t, {5}), Read(*fresh, {5}));
}

// With a TTL, a pending count starts again once its id has been absent for ttl_steps steps:
// seen at steps 1 and 3 under TTL 2 (absent one step) it is admitted; at 1 and 4 it is not.
TEST(RowPolicyTest, APendingCountStartsAgainAfterTtlStepsAbsent) {
  TablePolicy policy;
  policy.admission_min_count = 2;
  policy.ttl_steps = 2;
  auto t = MakeTable(PolicyJob(policy), 4);
  Step(*t, {1, 2}, 1);  // version 1
  Step(*t, {}, 2);
  Step(*t, {1}, 3);  // id 1: absent at 2 only, its second step: admitted
  EXPECT_EQ(Held(*t), std::set<uint64_t>({1}));
  Step(*t, {2}, 4);  // id 2: absent at 2 and 3, its count started again
  EXPECT_EQ(Held(*t), std::set<uint64_t>({1}));
  EXPECT_EQ(t->pending_admission(), 1);
  Step(*t, {2}, 5);  // id 2 admitted; row 1, not updated at 4 and 5, expires
  EXPECT_EQ(Held(*t), std::set<uint64_t>({2}));
}

// A restore refuses a state a live partition never holds, naming what, and changes nothing.
TEST(RowPolicyTest, ARestoreRefusesImpossiblePolicyStateWhole) {
  TablePolicy policy;
  policy.admission_min_count = 3;
  policy.ttl_steps = 4;
  auto t = MakeTable(PolicyJob(policy), 4);
  for (uint32_t s = 1; s <= 3; ++s) Step(*t, {uint64_t{s}, 10 + s, 20}, s);
  const TableState good = t->Snapshot(/*replica=*/true);
  ASSERT_GT(good.admission_ids.num_elements(), 0);
  ASSERT_GT(good.ids.num_elements(), 0);
  auto target = MakeTable(PolicyJob(policy), 4);
  ASSERT_TRUE(target->Restore(good).ok());
  auto refused = [&](TableState bad, const std::string& why) {
    Status s = target->Restore(bad);
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << why;
    EXPECT_NE(s.message().find(why), std::string::npos) << s.ToString();
    EXPECT_EQ(Held(*target), Held(*t)) << "a refused restore changed the partition";
  };
  TableState late = good;
  late.row_last_update = Tensor::Empty({good.ids.num_elements()}, DType::kUInt64);
  for (int64_t r = 0; r < good.ids.num_elements(); ++r) late.row_last_update.u64()[r] = 1ull << 40;
  refused(late, "after its own");
  TableState count = good;
  count.admission_counts = Tensor::Empty({good.admission_ids.num_elements()}, DType::kUInt32);
  for (int64_t i = 0; i < good.admission_ids.num_elements(); ++i)
    count.admission_counts.u32()[i] = 3;
  refused(count, "pending admission with count 3");
  TableState twice = good;
  twice.admission_ids = Tensor::Empty({1}, DType::kUInt64);
  twice.admission_ids.u64()[0] = good.ids.u64()[0];  // pending and held at once
  twice.admission_counts = Tensor::Zeros({1}, DType::kUInt32);
  twice.admission_counts.u32()[0] = 1;
  twice.admission_last_seen = Tensor::Zeros({1}, DType::kUInt64);
  refused(twice, "pending admission");
}

TEST(RowPolicyTest, TheCoinAdmitsItsShareOfIdsTheSameInEveryProcess) {
  TablePolicy policy;
  policy.admission_probability = 0.25f;
  std::vector<uint64_t> ids(4000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i * 7 + 3;
  auto a = MakeTable(PolicyJob(policy), 4);
  auto b = MakeTable(PolicyJob(policy), 4);
  Step(*a, ids, 1);
  Step(*b, ids, 2);
  EXPECT_NEAR(static_cast<double>(a->rows_held()) / 4000, 0.25, 0.03);
  EXPECT_EQ(Held(*a), Held(*b)) << "the coin is a hash of (seed, table, id)";
  EXPECT_EQ(a->policy_counts().dropped_gradients, 4000 - a->rows_held());
  auto other = MakeTable(PolicyJob(policy), 4, 0, "other");
  Step(*other, ids, 1);
  EXPECT_NE(Held(*a), Held(*other));
  // A rejected id stays rejected.
  Step(*a, ids, 3);
  EXPECT_EQ(Held(*a), Held(*b));
}

TEST(RowPolicyTest, TtlEvictsExactlyTheRowsNotUpdatedForTtlSteps) {
  TablePolicy policy;
  policy.ttl_steps = 2;
  auto t = MakeTable(PolicyJob(policy), 4);
  Step(*t, {1, 2, 3}, 1);  // version 1
  Step(*t, {2}, 2);        // 2: nothing is 2 steps old yet
  EXPECT_EQ(Held(*t), std::set<uint64_t>({1, 2, 3}));
  Step(*t, {3}, 3);  // 3: row 1, last updated at 1, goes
  EXPECT_EQ(Held(*t), std::set<uint64_t>({2, 3}));
  const std::vector<float> row2 = Read(*t, {2});
  Step(*t, {}, 4);  // 4: row 2 (2) goes; row 3 (3) stays
  EXPECT_EQ(Held(*t), std::set<uint64_t>({3}));
  EXPECT_EQ(t->policy_counts().evicted_ttl, 2);
  // A worker restarted during step 4 pulls version 3, row 2 included, exactly.
  Tensor rows, updates;
  ASSERT_TRUE(t->Lookup(Ids({2}), 3, &rows, &updates).ok());
  EXPECT_EQ(std::vector<float>(rows.f32(), rows.f32() + 4), row2);
  // An evicted id comes back from its initial values.
  auto fresh = MakeTable(PolicyJob(TablePolicy{}), 4);
  EXPECT_EQ(Read(*t, {1}), Read(*fresh, {1}));
  Step(*t, {1}, 9);
  Step(*fresh, {1}, 9);
  EXPECT_EQ(Read(*t, {1}), Read(*fresh, {1}));
}

// The documented rule, by hand: after each step, while more than `capacity` rows are held, the
// rows with the smallest key go, down to capacity - capacity / 16.
std::set<uint64_t> ReferenceCapacity(const std::vector<std::vector<uint64_t>>& steps,
                                     int64_t capacity, EvictionOrder order) {
  std::map<uint64_t, std::pair<int64_t, int64_t>> held;  // id -> (updates, last update)
  int64_t version = 0;
  for (const auto& ids : steps) {
    ++version;
    for (uint64_t id : ids) {
      held[id].first += 1;
      held[id].second = version;
    }
    if (static_cast<int64_t>(held.size()) <= capacity) continue;
    std::vector<std::tuple<int64_t, int64_t, uint64_t>> keys;
    for (const auto& [id, c] : held) {
      keys.emplace_back(order == EvictionOrder::kLfu ? std::make_tuple(c.first, c.second, id)
                                                     : std::make_tuple(c.second, c.first, id));
    }
    std::sort(keys.begin(), keys.end());
    const auto victims = static_cast<int64_t>(held.size()) - (capacity - capacity / 16);
    for (int64_t k = 0; k < victims; ++k) held.erase(std::get<2>(keys[static_cast<size_t>(k)]));
  }
  std::set<uint64_t> ids;
  for (const auto& [id, c] : held) ids.insert(id);
  return ids;
}

TEST(RowPolicyTest, CapacityEvictsTheLeastFrequentlyOrRecentlyUpdatedRows) {
  std::mt19937 rng(4);
  std::vector<std::vector<uint64_t>> steps;
  for (int s = 0; s < 40; ++s) {
    std::set<uint64_t> ids;
    for (int k = 0; k < 6; ++k) ids.insert(rng() % (s % 3 == 0 ? 8 : 60));  // a hot set, a tail
    steps.emplace_back(ids.begin(), ids.end());
  }
  for (EvictionOrder order : {EvictionOrder::kLfu, EvictionOrder::kLru}) {
    TablePolicy policy;
    policy.capacity_rows = 32;
    policy.eviction = order;
    auto t = MakeTable(PolicyJob(policy), 4);
    std::vector<std::vector<uint64_t>> done;
    for (size_t s = 0; s < steps.size(); ++s) {
      Step(*t, steps[s], static_cast<uint32_t>(s));
      done.push_back(steps[s]);
      ASSERT_EQ(Held(*t), ReferenceCapacity(done, 32, order))
          << kEvictionOrders.Name(order) << " after step " << s + 1;
      ASSERT_LE(t->rows_held(), 32);
    }
    EXPECT_GT(t->policy_counts().evicted_capacity, 0) << kEvictionOrders.Name(order);
  }
}

TEST(RowPolicyTest, ARestoredPartitionContinuesBitForBit) {
  TablePolicy policy;
  policy.admission_min_count = 2;
  policy.ttl_steps = 3;
  policy.capacity_rows = 24;
  policy.eviction = EvictionOrder::kLru;
  const JobConfig job = PolicyJob(policy);
  std::mt19937 rng(8);
  std::vector<std::vector<uint64_t>> steps;
  for (int s = 0; s < 30; ++s) {
    std::set<uint64_t> ids;
    for (int k = 0; k < 9; ++k) ids.insert(rng() % 50);
    steps.emplace_back(ids.begin(), ids.end());
  }
  auto a = MakeTable(job, 4);
  auto b = MakeTable(job, 4);
  for (int s = 0; s < 30; ++s) {
    if (s == 13) {  // not a multiple of the TTL: the pending ids' sweeps keep their phase
      const TableState saved = a->Snapshot(/*replica=*/true);
      EXPECT_GT(saved.admission_ids.num_elements(), 0);
      ASSERT_TRUE(b->Restore(saved).ok());
    }
    Step(*a, steps[static_cast<size_t>(s)], static_cast<uint32_t>(s));
    if (s >= 13) Step(*b, steps[static_cast<size_t>(s)], static_cast<uint32_t>(s));
  }
  ASSERT_EQ(Held(*a), Held(*b));
  EXPECT_EQ(a->pending_admission(), b->pending_admission());
  std::vector<uint64_t> all(50);
  std::iota(all.begin(), all.end(), 0);
  EXPECT_EQ(Read(*a, all), Read(*b, all));
  EXPECT_GT(a->policy_counts().evicted_ttl + a->policy_counts().evicted_capacity, 0);
}

}  // namespace
}  // namespace towerps::ps
