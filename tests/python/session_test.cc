// The PyTorch workers' C++ session (python/session.h) against a real server, without Python: so
// that it runs under the sanitizers too. Two workers in threads take sync steps; the values they
// load are the servers' SGD of the mean of their gradients, dense and by row.
#include "python/session.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "job/initial_rows.h"
#include "tests/ps/cluster.h"
#include "tests/testing/status_assert.h"

namespace towerps::python {
namespace {

using ps::testing::Cluster;

constexpr int64_t kDim = 4;
constexpr float kLr = 0.5f, kTableLr = 0.25f;

ps::JobConfig Job() {
  ps::JobConfig j;
  j.workers = 2;
  j.servers = 1;
  j.seed = 11;
  j.optimizer.kind = ps::OptimizerKind::kSgd;
  j.optimizer.learning_rate = kLr;
  j.table_optimizer.kind = ps::TableOptimizerKind::kSgd;
  j.table_optimizer.learning_rate = kTableLr;
  j.schedule.kind = ps::LrScheduleKind::kConstant;
  return j;
}

SessionOptions Options(const Cluster& cluster, int rank) {
  SessionOptions o;
  o.rank = rank;
  o.ps_endpoints = cluster.endpoints();
  o.job = Job();
  o.security = cluster.security();
  o.transport_path = TransportPath::kTcp;
  o.worker.rpc_timeout = std::chrono::seconds(20);
  return o;
}

const std::vector<ParameterSpec> kParameters = {{"w", {2, 3}}, {"b", {3}}};
const std::vector<TableSpec> kTables = {{.name = "emb", .rows = 100, .dim = kDim, .policy = ""}};

// Worker r's gradient of parameter v: distinct, non-zero values.
std::vector<float> Gradient(int r, int v, int64_t n) {
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] = 0.1f * (r + 1) * (v + 1) + 0.01f * i;
  return g;
}

// A worker with options `o`, its parameters' values in `values` ('w' and 'b').
Result<std::unique_ptr<Session>> StartWorker(const SessionOptions& o,
                                             std::vector<std::vector<float>>& values) {
  values = {std::vector<float>(6, 1.0f), std::vector<float>(3, -2.0f)};
  return Session::Start(o, kParameters, {values[0].data(), values[1].data()}, kTables);
}

Result<std::unique_ptr<Session>> StartWorker(const Cluster& cluster, int rank,
                                             std::vector<std::vector<float>>& values) {
  return StartWorker(Options(cluster, rank), values);
}

// The one worker of a one-worker job (`job`, on `cluster`), joined, with step 0's values in
// `values` (its parameters' buffers).
Result<std::unique_ptr<Session>> StartOnlyWorker(const Cluster& cluster, const ps::JobConfig& job,
                                                 std::vector<std::vector<float>>& values) {
  SessionOptions o = Options(cluster, 0);
  o.job = job;
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, StartWorker(o, values));
  TOWERPS_RETURN_IF_ERROR(s->AwaitValues({values[0].data(), values[1].data()}));
  return s;
}

// Each of the table's rows `ids` after one SGD step of `gradient[i]` (every element) from its
// initial value, as `after` holds them (a row per id).
void ExpectRowsStepped(const ps::JobConfig& job, const std::vector<uint64_t>& ids,
                       const std::vector<float>& gradient, const std::vector<float>& after) {
  const ps::InitialRows initial(job.seed, "emb", 0.05f);
  for (size_t i = 0; i < ids.size(); ++i) {
    float start[kDim];
    initial.Fill(ids[i], kDim, start);
    for (int d = 0; d < kDim; ++d) {
      EXPECT_FLOAT_EQ(after[i * kDim + static_cast<size_t>(d)], start[d] - kTableLr * gradient[i])
          << "row " << ids[i];
    }
  }
}

TEST(SessionTest, TwoSyncWorkersLoadTheServersSgdOfTheirMeanGradient) {
  Cluster cluster(Job(), "session");
  std::vector<std::vector<float>> values[2];
  std::vector<float> rows[2];
  auto run = [&](int r) -> Status {
    TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, StartWorker(cluster, r, values[r]));
    TOWERPS_RETURN_IF_ERROR(s->AwaitValues({values[r][0].data(), values[r][1].data()}));
    // Worker 0 looks up rows 3 and 7, worker 1 rows 7 and 9.
    const std::vector<uint64_t> ids =
        r == 0 ? std::vector<uint64_t>{3, 7} : std::vector<uint64_t>{7, 9};
    std::vector<float> pulled(2 * kDim);
    TOWERPS_RETURN_IF_ERROR(s->tables().PullRows(0, ids.data(), 2, pulled.data()));
    for (int v = 0; v < 2; ++v) {
      const std::vector<float> g = Gradient(r, v, static_cast<int64_t>(values[r][v].size()));
      TOWERPS_RETURN_IF_ERROR(s->Push(v, g.data(), static_cast<int64_t>(g.size())));
    }
    const std::vector<float> row_grads(2 * kDim, r == 0 ? 1.0f : 3.0f);
    TOWERPS_RETURN_IF_ERROR(s->tables().PushRows(0, ids.data(), row_grads.data(), 2));
    TOWERPS_RETURN_IF_ERROR(s->EndStep(0.5));
    TOWERPS_RETURN_IF_ERROR(s->AwaitValues({values[r][0].data(), values[r][1].data()}));
    const uint64_t all[3] = {3, 7, 9};
    rows[r].resize(3 * kDim);
    TOWERPS_RETURN_IF_ERROR(s->tables().PullRows(0, all, 3, rows[r].data()));
    EXPECT_EQ(s->iteration(), 1);
    return Status::Ok();
  };
  auto w1 = std::async(std::launch::async, run, 1);
  const Status s0 = run(0);
  const Status s1 = w1.get();
  ASSERT_TRUE(s0.ok()) << s0.ToString();
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  for (int v = 0; v < 2; ++v) {
    const float initial = v == 0 ? 1.0f : -2.0f;
    const auto n = static_cast<int64_t>(values[0][v].size());
    const std::vector<float> g0 = Gradient(0, v, n), g1 = Gradient(1, v, n);
    for (int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<size_t>(i);
      EXPECT_NEAR(values[0][v][k], initial - kLr * (g0[k] + g1[k]) / 2, 1e-6) << v << "," << i;
      EXPECT_EQ(values[0][v][k], values[1][v][k]);
    }
  }
  // Rows: 3 took worker 0's gradient, 7 both, 9 worker 1's; each divided by the 2 workers.
  const ps::InitialRows initial(Job().seed, "emb", 0.05f);
  const float mean_grad[3] = {1.0f / 2, (1.0f + 3.0f) / 2, 3.0f / 2};
  const uint64_t all[3] = {3, 7, 9};
  for (int i = 0; i < 3; ++i) {
    float start[kDim];
    initial.Fill(all[i], kDim, start);
    for (int d = 0; d < kDim; ++d) {
      EXPECT_NEAR(rows[0][i * kDim + d], start[d] - kTableLr * mean_grad[i], 1e-6)
          << "row " << all[i];
    }
  }
  EXPECT_EQ(rows[0], rows[1]);
}

TEST(SessionTest, BadGradientsAreRefusedNamingTheParameter) {
  ps::JobConfig job = Job();
  job.workers = 1;
  Cluster cluster(job, "session_bad");
  SessionOptions o = Options(cluster, 0);
  o.job = job;
  std::vector<float> w(6, 0.0f), b(3, 0.0f);
  Result<std::unique_ptr<Session>> s =
      Session::Start(o, kParameters, {w.data(), b.data()}, kTables);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Session& session = **s;
  ASSERT_TRUE(session.AwaitValues({w.data(), b.data()}).ok());
  Status bad = session.Push(1, b.data(), 2);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("'b' has 2 elements, its shape [3] has 3"), std::string::npos)
      << bad.message();
  ASSERT_TRUE(session.Push(1, b.data(), 3).ok());
  bad = session.Push(1, b.data(), 3);
  EXPECT_NE(bad.message().find("'b' was pushed twice"), std::string::npos) << bad.message();
  const uint64_t id = 5;
  const std::vector<float> grad(kDim, 1.0f);
  bad = session.tables().PushRows(0, &id, grad.data(), 1);
  EXPECT_NE(bad.message().find("row 5, which this step did not pull"), std::string::npos)
      << bad.message();
  const uint64_t beyond = 100;  // the table has 100 rows
  std::vector<float> row(kDim);
  bad = session.tables().PullRows(0, &beyond, 1, row.data());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("emb"), std::string::npos) << bad.message();
  // The step still ends: 'w' goes as zeros, the table with no rows.
  EXPECT_TRUE(session.EndStep(std::nullopt).ok());
  EXPECT_TRUE(session.AwaitValues({w.data(), b.data()}).ok());
  EXPECT_EQ(w[0], 0.0f);                                           // a zero gradient moved nothing
  EXPECT_FALSE(Session::Start(o, {{"w", {0}}}, {w.data()}).ok());  // an empty dimension
}

// A table's rows go through the native worker's TableExchange: a table looked up twice in a
// step takes one push for both lookups, and a non-finite row gradient is withheld and named, as
// a native worker's is (--on-nonfinite fail).
TEST(SessionTest, ATableLookedUpTwiceTakesOnePushAndANonFiniteRowIsWithheldAndNamed) {
  ps::JobConfig job = Job();
  job.workers = 1;
  Cluster cluster(job, "session_rows");
  std::vector<std::vector<float>> values;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> s, StartOnlyWorker(cluster, job, values));
  const std::vector<float*> dst = {values[0].data(), values[1].data()};
  std::vector<float> first(kDim), second(2 * kDim);
  const uint64_t three = 3, eight_three[2] = {8, 3};
  ASSERT_OK(s->tables().PullRows(0, &three, 1, first.data()));
  ASSERT_OK(s->tables().PullRows(0, eight_three, 2, second.data()));
  EXPECT_TRUE(std::equal(first.begin(), first.end(), second.begin() + kDim));  // row 3 both times
  const uint64_t both[2] = {3, 8};
  const std::vector<float> ones(2 * kDim, 1.0f);
  ASSERT_OK(s->tables().PushRows(0, both, ones.data(), 2));
  ASSERT_OK(s->EndStep(0.5));
  ASSERT_OK(s->AwaitValues(dst));
  std::vector<float> after(2 * kDim);
  ASSERT_OK(s->tables().PullRows(0, both, 2, after.data()));
  ExpectRowsStepped(job, {3, 8}, {1, 1}, after);
  std::vector<float> bad(2 * kDim, 0.0f);
  bad[5] = std::nanf("");
  ASSERT_OK(s->tables().PushRows(0, both, bad.data(), 2));
  const Status stopped = s->EndStep(0.5);
  EXPECT_EQ(stopped.code(), StatusCode::kFailedPrecondition) << stopped.ToString();
  EXPECT_NE(
      stopped.message().find("diverged at step 2 (gradient of table 'emb' = nan at element 5"),
      std::string::npos)
      << stopped.message();
}

// A step's gradients go in buckets (WorkerOptions::bucket_bytes): with the default 256 KiB, a
// small model's parameters and the step's table rows reach the server as one message; with
// buckets of 0 bytes each parameter's gradient is a message of its own. The values are the same.
TEST(SessionTest, ASmallModelsStepIsOneMessagePerServer) {
  ps::JobConfig job = Job();
  job.workers = 1;
  std::vector<std::vector<float>> after;
  for (const int64_t bucket : {worker::WorkerOptions{}.bucket_bytes, int64_t{0}}) {
    Cluster cluster(job, "session_bucket" + std::to_string(bucket));
    SessionOptions o = Options(cluster, 0);
    o.job = job;
    o.worker.bucket_bytes = bucket;
    std::vector<std::vector<float>> values;
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> s, StartWorker(o, values));
    const std::vector<float*> dst = {values[0].data(), values[1].data()};
    ASSERT_OK(s->AwaitValues(dst));
    // A tool's own identity: worker 0's would take the session's replies.
    const std::unique_ptr<ps::Client> tool = cluster.MakeClient(
        0, std::chrono::seconds(20), nullptr, TransportPath::kTcp, "tool:session-test");
    const uint64_t ids[2] = {3, 8};
    std::vector<float> rows(2 * kDim);
    ASSERT_OK(s->tables().PullRows(0, ids, 2, rows.data()));
    const ps::ServerStatsReport before = *tool->Stats(0).get();
    const std::vector<float> gw = Gradient(0, 0, 6), gb = Gradient(0, 1, 3);
    const std::vector<float> ones(2 * kDim, 1.0f);
    ASSERT_OK(s->Push(0, gw.data(), 6));
    ASSERT_OK(s->Push(1, gb.data(), 3));
    ASSERT_OK(s->tables().PushRows(0, ids, ones.data(), 2));
    ASSERT_OK(s->EndStep(0.5));
    const ps::ServerStatsReport pushed = *tool->Stats(0).get();
    // The stats request itself is one; the step's pushes are one bundle, or one per parameter
    // and one for the table.
    EXPECT_EQ(pushed.messages_in - before.messages_in, bucket > 0 ? 2u : 4u) << bucket;
    ASSERT_OK(s->AwaitValues(dst));
    after.push_back(values[0]);
    after.back().insert(after.back().end(), values[1].begin(), values[1].end());
  }
  EXPECT_EQ(after[0], after[1]);
  for (size_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(after[0][i], 1.0f - kLr * Gradient(0, 0, 6)[i]);
}

// Lookups outside the step (an evaluation's, no gradient to push) pull only their own ids: they
// do not join the step's ids, so many of them cost each its own rows, and the step's push covers
// only what the step looked up; AddRows sums the blocks of a table looked up twice.
TEST(SessionTest, LookupsOutsideTheStepPullTheirOwnIdsAndBlocksOfOneTableAreSummed) {
  ps::JobConfig job = Job();
  job.workers = 1;
  Cluster cluster(job, "session_aside");
  std::vector<std::vector<float>> values;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> s, StartOnlyWorker(cluster, job, values));
  const std::vector<float*> dst = {values[0].data(), values[1].data()};
  const uint64_t step_ids[2] = {3, 8};
  const TableLookups::Ids step{.table = 0, .ids = step_ids};
  std::vector<TableLookups::Rows> rows;
  ASSERT_OK(s->tables().Lookup({&step, 1}, &rows));
  for (uint64_t e = 20; e < 30; ++e) {  // an evaluation's lookups, one id each
    const TableLookups::Ids aside{.table = 0, .ids = {&e, 1}};
    std::vector<TableLookups::Rows> got;
    ASSERT_OK(s->tables().Lookup({&aside, 1}, &got, /*step=*/false));
    ASSERT_EQ(got[0].ids.num_elements(), 1) << "id " << e << ": the lookups before joined it";
  }
  // The step's second lookup of the table: its rows are the step's ids so far and its own.
  const uint64_t more = 5;
  const TableLookups::Ids again{.table = 0, .ids = {&more, 1}};
  ASSERT_OK(s->tables().Lookup({&again, 1}, &rows));
  EXPECT_EQ(rows[0].ids.num_elements(), 3);
  // Two blocks with row 3 in both: its gradient is their sum.
  const std::vector<float> ones(2 * kDim, 1.0f), twos(kDim * 2, 2.0f);
  const uint64_t three_five[2] = {3, 5};
  ASSERT_OK(s->tables().AddRows(0, step_ids, ones.data(), 2));
  ASSERT_OK(s->tables().AddRows(0, three_five, twos.data(), 2));
  const uint64_t twenty = 20;
  EXPECT_FALSE(s->tables().AddRows(0, &twenty, ones.data(), 1).ok());  // not the step's
  ASSERT_OK(s->EndStep(0.5));
  ASSERT_OK(s->AwaitValues(dst));
  const uint64_t all[4] = {3, 5, 8, 20};
  std::vector<float> after(4 * kDim);
  ASSERT_OK(s->tables().PullRows(0, all, 4, after.data()));
  ExpectRowsStepped(job, {3, 5, 8, 20}, {3, 2, 1, 0}, after);  // per id: the blocks' sum
}

// Worker 1 of a softsync job (python/session.h): joins, waits until `go` (at most 20 s), pushes
// one step's gradients and ends the step; then, given `final_w`, pulls the final 'w' into it.
Status LateSoftsyncWorker(const Cluster& cluster, const ps::JobConfig& job, std::future<void> go,
                          std::vector<float>* final_w) {
  SessionOptions o = Options(cluster, 1);
  o.job = job;
  std::vector<std::vector<float>> values;
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<Session> s, StartWorker(o, values));
  std::vector<float>& w = values[0];
  std::vector<float>& b = values[1];
  TOWERPS_RETURN_IF_ERROR(s->AwaitValues({w.data(), b.data()}));
  go.wait_for(std::chrono::seconds(20));
  for (int v = 0; v < 2; ++v) {
    const std::vector<float> g = Gradient(1, v, v == 0 ? 6 : 3);
    TOWERPS_RETURN_IF_ERROR(s->Push(v, g.data(), static_cast<int64_t>(g.size())));
  }
  TOWERPS_RETURN_IF_ERROR(s->EndStep(0.5));
  if (final_w == nullptr) return Status::Ok();
  TOWERPS_RETURN_IF_ERROR(s->PullFinal({w.data(), b.data()}));
  *final_w = w;
  return Status::Ok();
}

// A gradient accumulated in the session's buffer goes without a copy; a buffer a server still
// reads through shared memory is not handed out again: in softsync (n = 1: an update averages
// both workers' gradients) the server keeps worker 0's until worker 1's comes, after worker 0's
// step has ended, so worker 0's next buffer is another one, with the values kept.
TEST(SessionTest, AGradientBufferAServerStillReadsIsNotHandedOutAgain) {
  ps::JobConfig job = Job();
  job.mode = ps::UpdateMode::kSoftsync;
  Cluster cluster(job, "session_lend");
  std::promise<void> worker0_stepped;
  std::vector<float> final1;
  auto worker1 = std::async(std::launch::async, LateSoftsyncWorker, std::cref(cluster), job,
                            worker0_stepped.get_future(), &final1);
  SessionOptions o = Options(cluster, 0);
  o.job = job;
  o.transport_path = TransportPath::kShm;
  std::vector<std::vector<float>> values;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> started, StartWorker(o, values));
  Session& s = *started;
  std::vector<float>& w = values[0];
  std::vector<float>& b = values[1];
  ASSERT_TRUE(s.AwaitValues({w.data(), b.data()}).ok());
  float* lent = s.GradientBuffer(0, false);
  ASSERT_NE(lent, nullptr);
  EXPECT_EQ(s.GradientBuffer(0, false), lent);  // nobody reads it yet: the same one
  const std::vector<float> g = Gradient(0, 0, 6), gb = Gradient(0, 1, 3);
  std::copy(g.begin(), g.end(), lent);
  ASSERT_TRUE(s.Push(0, lent, 6).ok());
  ASSERT_TRUE(s.Push(1, gb.data(), 3).ok());
  EXPECT_EQ(s.copied_pushes(), 1);  // only 'b', which was not in its buffer
  ASSERT_TRUE(s.EndStep(0.5).ok());
  float* next = s.GradientBuffer(0, true);  // the server holds `lent` until worker 1 pushes
  worker0_stepped.set_value();
  ASSERT_NE(next, nullptr);
  EXPECT_NE(next, lent);
  EXPECT_EQ(std::vector<float>(next, next + 6), g) << "the gradient's values were not kept";
  ASSERT_TRUE(s.AwaitValues({w.data(), b.data()}).ok());
  ASSERT_TRUE(s.PullFinal({w.data(), b.data()}).ok());
  const Status s1 = worker1.get();
  ASSERT_TRUE(s1.ok()) << s1.ToString();
  // The update used worker 0's gradient as it was lent: the SGD step of the two workers' mean.
  const std::vector<float> g1 = Gradient(1, 0, 6);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(w[i], 1.0f - kLr * (g[i] + g1[i]) / 2, 1e-6) << i;
  EXPECT_EQ(w, final1);
}

// With every buffer held (here the one allowed), the session hands out none, and a push of the
// held buffer's memory is copied rather than lent again.
TEST(SessionTest, WithEveryGradientBufferHeldPushesCopy) {
  ps::JobConfig job = Job();
  job.mode = ps::UpdateMode::kSoftsync;
  Cluster cluster(job, "session_held");
  std::promise<void> worker0_stepped;
  auto worker1 = std::async(std::launch::async, LateSoftsyncWorker, std::cref(cluster), job,
                            worker0_stepped.get_future(), nullptr);
  SessionOptions o = Options(cluster, 0);
  o.job = job;
  o.transport_path = TransportPath::kShm;
  o.max_gradient_buffers = 1;
  std::vector<std::vector<float>> values;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Session> started, StartWorker(o, values));
  Session& s = *started;
  std::vector<float>& w = values[0];
  std::vector<float>& b = values[1];
  ASSERT_TRUE(s.AwaitValues({w.data(), b.data()}).ok());
  float* lent = s.GradientBuffer(0, false);
  ASSERT_NE(lent, nullptr);
  const std::vector<float> g = Gradient(0, 0, 6), gb = Gradient(0, 1, 3);
  std::copy(g.begin(), g.end(), lent);
  ASSERT_TRUE(s.Push(0, lent, 6).ok());
  ASSERT_TRUE(s.Push(1, gb.data(), 3).ok());
  ASSERT_TRUE(s.EndStep(0.5).ok());
  EXPECT_EQ(s.GradientBuffer(0, true), nullptr);  // the server holds the only one
  ASSERT_TRUE(s.AwaitValues({w.data(), b.data()}).ok());
  const int64_t copied = s.copied_pushes();
  ASSERT_TRUE(s.Push(0, lent, 6).ok());  // the held memory itself: copied, not lent again
  EXPECT_EQ(s.copied_pushes(), copied + 1);
  worker0_stepped.set_value();
  ASSERT_TRUE(s.Push(1, gb.data(), 3).ok());
  ASSERT_TRUE(s.EndStep(0.5).ok());
  const Status s1 = worker1.get();
  ASSERT_TRUE(s1.ok()) << s1.ToString();
}

}  // namespace
}  // namespace towerps::python
