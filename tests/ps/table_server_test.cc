// Tables through real towerps-server processes and ps::Client::Pull/Push of a table: rows spread
// over two servers by id, the same bits over TCP and shared memory as an in-process partition
// computes, errors that name the table, the servers' row counts and row staleness in their
// statistics, rows kept across a server's restart from its checkpoint, and calls made together
// travelling as one message each way.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "job/row_batch.h"
#include "tests/ps/cluster.h"
#include "tests/ps/table_test_util.h"

namespace towerps::ps {
namespace {

using testing::Check;
using testing::Cluster;
using testing::Get;
using testing::Ids;
using testing::Random;
using testing::RandomRows;

constexpr int64_t kDim = 4;
constexpr uint64_t kSignature = 0x7ab1e;

// A dense variable beside a bounded table, as a recommendation model has.
std::vector<VariableSpec> Model() {
  return {{"dense", {10}}, TableVariable("user", 5000, kDim, 0.1f)};
}

JobConfig Job(UpdateMode mode, int workers, int servers) {
  JobConfig j;
  j.mode = mode;
  j.workers = workers;
  j.servers = servers;
  j.table_optimizer.kind = TableOptimizerKind::kAdagrad;
  j.table_optimizer.learning_rate = 0.5f;
  j.schedule.kind = LrScheduleKind::kConstant;
  return j;
}

std::vector<std::unique_ptr<Client>> Connect(const Cluster& cluster, int workers,
                                             TransportPath path = TransportPath::kTcp) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int r = 0; r < workers; ++r) {
    clients.push_back(cluster.MakeClient(r, std::chrono::seconds(20), nullptr, path));
    Get(clients.back()->Register(Model(), kSignature));
  }
  Check(clients[0]->Init(0, Random({10}, 1)));  // tables take no initial value
  return clients;
}

// Worker w's ids at step s: a few popular ids every worker shares and some of its own.
std::vector<uint64_t> BatchIds(int w, int64_t s) {
  std::mt19937_64 rng(static_cast<uint64_t>(100 * s + w));
  std::vector<uint64_t> ids = {1, 2, 3, 2, 1};
  for (int i = 0; i < 40; ++i) ids.push_back(rng() % 5000);
  return ids;
}

// Worker w's gradient of its batch's rows at step s: g = row - 1e-4 * id per example, summed
// over the batch's repeats of each id.
Tensor Gradient(const UniqueIds& u, const std::vector<uint64_t>& batch, const float* rows) {
  std::vector<float> per_example(batch.size() * kDim);
  GatherRows(u, rows, kDim, per_example.data());
  for (size_t i = 0; i < batch.size(); ++i) {
    for (int64_t j = 0; j < kDim; ++j) per_example[i * kDim + j] -= 1e-4f * batch[i];
  }
  Tensor grads = Tensor::Empty({u.size(), kDim});
  SumRowsById(u, per_example.data(), kDim, grads.f32());
  return grads;
}

// Sync steps [first, first + steps) of every worker: each pulls its batch's unique rows, pushes
// their gradient and a gradient of the dense variable. `combined`: each push carries the pull of
// the worker's next batch (PushThenPull), as a worker sends them.
void TrainSync(std::vector<std::unique_ptr<Client>>& clients, int servers, int64_t first,
               int64_t steps, bool combined = false) {
  const size_t workers = clients.size();
  std::vector<Future<Result<PulledVariable>>> pulls(workers);
  auto unique = [&](size_t w, int64_t step) {
    return Deduplicate(BatchIds(static_cast<int>(w), step), servers);
  };
  for (size_t w = 0; w < workers; ++w) {
    pulls[w] = clients[w]->Pull(
        {.variable_id = 1, .ids = unique(w, first).ids, .min_version = first, .clock = first});
  }
  for (int64_t step = first; step < first + steps; ++step) {
    const bool last = step + 1 == first + steps;
    std::vector<Future<Result<PushReport>>> pushes;
    for (size_t w = 0; w < workers; ++w) {
      const UniqueIds u = unique(w, step);
      PulledVariable rows = Get(std::move(pulls[w]));
      ASSERT_EQ(rows.version, step);
      const PushRequest push{
          .variable_id = 1,
          .version = step,
          .clock = step,
          .gradient = Gradient(u, BatchIds(static_cast<int>(w), step), rows.rows.f32()),
          .ids = u.ids,
          .pulled_updates = rows.updates};
      if (combined && !last) {
        Client::PushAndPull both = clients[w]->PushThenPull(push, {.variable_id = 1,
                                                                   .ids = unique(w, step + 1).ids,
                                                                   .min_version = step + 1,
                                                                   .clock = step + 1});
        pushes.push_back(std::move(both.push));
        pulls[w] = std::move(both.pull);
      } else {
        pushes.push_back(clients[w]->Push(push));
      }
      pushes.push_back(clients[w]->Push({.variable_id = 0,
                                         .version = step,
                                         .clock = step,
                                         .gradient = Random({10}, static_cast<uint32_t>(step))}));
    }
    for (auto& p : pushes) Get(std::move(p));
    if (combined || last) continue;
    for (size_t w = 0; w < workers; ++w) {
      pulls[w] = clients[w]->Pull({.variable_id = 1,
                                   .ids = unique(w, step + 1).ids,
                                   .min_version = step + 1,
                                   .clock = step + 1});
    }
  }
}

// The rows of ids 0..4999 after `steps` sync steps of two workers, as servers hold them.
std::vector<float> AllRows(Client& client, int64_t version) {
  std::vector<uint64_t> all(5000);
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  PulledVariable rows =
      Get(client.Pull({.variable_id = 1, .ids = Ids(all), .min_version = version}));
  return std::vector<float>(rows.rows.f32(), rows.rows.f32() + rows.rows.num_elements());
}

class TableServerTest : public testing::ClusterTest {};

// Three sync steps of two workers against two servers, over TCP and through shared memory,
// with each push carrying the next pull and without, on servers whose one shard runs on the I/O
// thread (--threads 1) and on servers with three shard threads, and the same steps applied to
// one in-process partition holding every row: the same bits.
TEST_F(TableServerTest, RowsOverTwoServersHoldTheBitsOfOnePartitionOverTcpAndSharedMemory) {
  struct Setup {
    TransportPath path;
    bool combined;
    const char* threads;
  };
  std::vector<std::vector<float>> results;
  for (const Setup& setup :
       {Setup{TransportPath::kTcp, false, "1"}, Setup{TransportPath::kShm, false, "1"},
        Setup{TransportPath::kTcp, true, "1"}, Setup{TransportPath::kShm, true, "3"}}) {
    const auto [path, combined, threads] = setup;
    cluster_.reset();  // a cluster's directory is named by the test: one at a time
    cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 2), "tables",
                                         std::vector<std::string>{"--threads", threads});
    ASSERT_TRUE(cluster_->ok());
    auto clients = Connect(*cluster_, 2, path);
    TrainSync(clients, 2, 0, 3, combined);
    results.push_back(AllRows(*clients[0], 3));
    const ServerStatsReport s0 = Get(clients[0]->Stats(0)), s1 = Get(clients[0]->Stats(1));
    EXPECT_GT(s0.table_rows, 0u);
    EXPECT_GT(s1.table_rows, 0u);
    uint64_t rows_pushed = 0;
    for (uint64_t c : s0.row_staleness_histogram) rows_pushed += c;
    for (uint64_t c : s1.row_staleness_histogram) rows_pushed += c;
    EXPECT_EQ(rows_pushed, s0.row_staleness_histogram[0] + s1.row_staleness_histogram[0])
        << "sync: every row at staleness 0";
    EXPECT_GT(rows_pushed, 200u);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  EXPECT_EQ(results[0], results[3]);

  // The reference: one partition of the same job and table, fed each step's pushes.
  JobConfig one = Job(UpdateMode::kSync, 2, 1);
  auto table = testing::MakeTable(one, kDim, 5000, "user", 0.1f);
  ShardCounters counters;
  for (int64_t step = 0; step < 3; ++step) {
    for (int w = 0; w < 2; ++w) {
      const std::vector<uint64_t> batch = BatchIds(w, step);
      const UniqueIds u = Deduplicate(batch, 1);
      Tensor rows, updates;
      ASSERT_TRUE(table->Lookup(u.ids, step, &rows, &updates).ok());
      const Tensor grads = Gradient(u, batch, rows.f32());
      ASSERT_TRUE(table
                      ->Push({.worker = w,
                              .base_version = step,
                              .clock = step,
                              .gradient = grads,
                              .ids = u.ids,
                              .pulled_updates = updates},
                             &counters)
                      .ok());
    }
  }
  std::vector<uint64_t> all(5000);
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  EXPECT_EQ(results[0], testing::Read(*table, all));
}

TEST_F(TableServerTest, ErrorsNameTheTableTheIdAndTheBound) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kAsync, 1, 2), "tables_bad");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 1);
  Result<PulledVariable> out = clients[0]->Pull({.variable_id = 1, .ids = Ids({3, 5000})}).get();
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("table user has 5000 rows: id 5000"), std::string::npos)
      << out.status().ToString();
  Result<PushReport> twice = clients[0]
                                 ->Push({.variable_id = 1,
                                         .gradient = RandomRows(2, kDim, 1),
                                         .ids = Ids({7, 7}),
                                         .pulled_updates = Tensor::Zeros({2}, DType::kUInt32)})
                                 .get();
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("id 7 appears twice"), std::string::npos);
  Result<PulledVariable> dense = clients[0]->Pull({.variable_id = 0, .ids = Ids({1})}).get();
  EXPECT_NE(dense.status().message().find("not a table"), std::string::npos);
  Status init = clients[0]->Init(1, Random({5000, kDim}, 2)).get();
  EXPECT_FALSE(init.ok());
  // The servers are unharmed: the table still serves.
  EXPECT_TRUE(clients[0]->Pull({.variable_id = 1, .ids = Ids({3, 4999})}).get().ok());
}

// A sync step torn by a worker's death: its table push is in (the partitions moved on to the
// next step) but not its dense one (that chunk still waits for it). Its successor finds the job
// at the lowest version with a probe, pulls its batch's rows at exactly that version (the
// partitions keep the rows the last step changed), recomputes the same gradient bit for bit,
// and pushes again: the partitions drop the repeat, the chunk completes the step, and the job
// ends with the undisturbed job's bits.
TEST_F(TableServerTest, TornStepIsRecomputedFromTheRowsBeforeIt) {
  std::vector<std::vector<float>> results;
  for (bool torn : {false, true}) {
    cluster_.reset();
    cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 2), "tables_torn");
    ASSERT_TRUE(cluster_->ok());
    auto clients = Connect(*cluster_, 2);
    TrainSync(clients, 2, 0, 1);
    // Step 1 of worker 1 (the predecessor): its rows at version 1, its gradient, its table push.
    const std::vector<uint64_t> batch = BatchIds(1, 1);
    const UniqueIds u = Deduplicate(batch, 2);
    const PulledVariable rows =
        Get(clients[1]->Pull({.variable_id = 1, .ids = u.ids, .min_version = 1, .clock = 1}));
    const Tensor grads = Gradient(u, batch, rows.rows.f32());
    const Tensor dense = Random({10}, 1);
    const PushRequest push{.variable_id = 1,
                           .version = 1,
                           .clock = 1,
                           .gradient = grads,
                           .ids = u.ids,
                           .pulled_updates = rows.updates};
    // Worker 0's step 1, whole.
    {
      const UniqueIds u0 = Deduplicate(BatchIds(0, 1), 2);
      const PulledVariable r0 =
          Get(clients[0]->Pull({.variable_id = 1, .ids = u0.ids, .min_version = 1}));
      Get(clients[0]->Push({.variable_id = 1,
                            .version = 1,
                            .clock = 1,
                            .gradient = Gradient(u0, BatchIds(0, 1), r0.rows.f32()),
                            .ids = u0.ids,
                            .pulled_updates = r0.updates}));
      auto d0 = clients[0]->Push({.variable_id = 0, .version = 1, .clock = 1, .gradient = dense});
      Get(clients[1]->Push(push));  // the predecessor's table push completes the partitions
      if (!torn)
        Get(clients[1]->Push({.variable_id = 0, .version = 1, .clock = 1, .gradient = dense}));
      if (torn) {
        clients[1].reset();  // dies before its dense push
        clients[1] = cluster_->MakeClient(1);
        Get(clients[1]->Register(Model(), kSignature));
        // Where the job stands: the partitions at 2, the chunk at 1.
        const PulledVariable probe = Get(clients[1]->Pull({.variable_id = 1, .ids = Ids({})}));
        EXPECT_EQ(probe.version, 2);
        const PulledVariable chunk = Get(clients[1]->Pull({.variable_id = 0, .min_version = 0}));
        EXPECT_EQ(chunk.version, 1);
        // The successor recomputes step 1 from exactly version 1: the same rows, the same bits.
        const PulledVariable again = Get(clients[1]->Pull(
            {.variable_id = 1, .ids = u.ids, .min_version = 1, .clock = 1, .exact = true}));
        ASSERT_EQ(again.version, 1);
        EXPECT_EQ(0,
                  std::memcmp(again.rows.raw_data(), rows.rows.raw_data(), rows.rows.byte_size()))
            << "the rows at version 1 changed";
        const Tensor regrads = Gradient(u, batch, again.rows.f32());
        EXPECT_EQ(0, std::memcmp(regrads.raw_data(), grads.raw_data(), grads.byte_size()));
        const PushReport repeat = Get(clients[1]->Push({.variable_id = 1,
                                                        .version = 1,
                                                        .clock = 1,
                                                        .gradient = regrads,
                                                        .ids = u.ids,
                                                        .pulled_updates = again.updates}));
        EXPECT_EQ(repeat.dropped_chunks, 2) << "both partitions had it already";
        Get(clients[1]->Push({.variable_id = 0, .version = 1, .clock = 1, .gradient = dense}));
      }
      Get(std::move(d0));
    }
    TrainSync(clients, 2, 2, 1);
    results.push_back(AllRows(*clients[0], 3));
  }
  EXPECT_EQ(results[0], results[1]);
}

// A pull of no ids tells every partition's version (and this worker's clock there: see the
// async test); a pull of
// every row exports the table: each row the servers hold, with its id, as pulls read them.
TEST_F(TableServerTest, EmptyPullsProbeEveryPartitionAndEveryRowExportsTheTable) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 2), "tables_probe");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 2);
  TrainSync(clients, 2, 0, 2);
  PulledVariable probe = Get(clients[1]->Pull({.variable_id = 1, .ids = Ids({})}));
  EXPECT_EQ(probe.version, 2);
  EXPECT_EQ(probe.max_version, 2);
  EXPECT_EQ(probe.rows.num_elements(), 0);
  // Exactly version 1 is still held (sync keeps one back); version 0 is not.
  EXPECT_TRUE(clients[0]
                  ->Pull({.variable_id = 1, .ids = Ids({}), .min_version = 1, .exact = true})
                  .get()
                  .ok());
  Result<PulledVariable> gone =
      clients[0]->Pull({.variable_id = 1, .ids = Ids({}), .min_version = 0, .exact = true}).get();
  EXPECT_EQ(gone.status().code(), StatusCode::kFailedPrecondition);

  PulledVariable all = Get(clients[0]->Pull({.variable_id = 1, .every_row = true}));
  const ServerStatsReport s0 = Get(clients[0]->Stats(0)), s1 = Get(clients[0]->Stats(1));
  ASSERT_EQ(static_cast<uint64_t>(all.ids.num_elements()), s0.table_rows + s1.table_rows);
  ASSERT_EQ(all.rows.num_elements(), all.ids.num_elements() * kDim);
  PulledVariable same = Get(clients[0]->Pull({.variable_id = 1, .ids = all.ids}));
  EXPECT_EQ(0, std::memcmp(same.rows.raw_data(), all.rows.raw_data(), all.rows.byte_size()));
  EXPECT_EQ(0,
            std::memcmp(same.updates.raw_data(), all.updates.raw_data(), all.updates.byte_size()));
}

// Calls made together (Client::Together) travel as one bundle per server each way, and each
// part is answered as if it came alone: the same rows as the same pulls made one by one.
TEST_F(TableServerTest, CallsMadeTogetherAreOneMessageEachWayWithTheSameReplies) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 1, 1), "tables_bundle");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 1);
  Client& c = *clients[0];
  TrainSync(clients, 1, 0, 2);
  const auto ids = [](int w) { return Deduplicate(BatchIds(w, 9), 1).ids; };
  auto pulls = [&] {
    std::vector<Future<Result<PulledVariable>>> f;
    f.push_back(c.Pull({.variable_id = 1, .ids = ids(0), .min_version = 2}));
    f.push_back(c.Pull({.variable_id = 1, .ids = ids(1), .min_version = 2}));
    f.push_back(c.Pull({.variable_id = 0, .min_version = 2}));
    return f;
  };
  const ServerStatsReport before = Get(c.Stats(0));
  std::vector<Future<Result<PulledVariable>>> together;
  c.Together([&] { together = pulls(); });
  std::vector<PulledVariable> got;
  for (auto& f : together) got.push_back(Get(std::move(f)));
  const ServerStatsReport after = Get(c.Stats(0));
  // The bundle and the second stats request in; the first stats reply and the bundle's out.
  EXPECT_EQ(after.messages_in - before.messages_in, 2u);
  EXPECT_EQ(after.messages_out - before.messages_out, 2u);
  EXPECT_EQ(after.rejected_messages, 0u);
  std::vector<Future<Result<PulledVariable>>> alone = pulls();
  for (size_t i = 0; i < alone.size(); ++i) {
    const PulledVariable one = Get(std::move(alone[i]));
    const Tensor& a = i < 2 ? one.rows : one.chunks.at(0).second;
    const Tensor& b = i < 2 ? got[i].rows : got[i].chunks.at(0).second;
    ASSERT_EQ(a.byte_size(), b.byte_size()) << "call " << i;
    EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.byte_size())) << "call " << i;
    EXPECT_EQ(one.version, got[i].version);
  }
  // An error stays in its part: a pull of a table row beyond the table fails alone.
  Future<Result<PulledVariable>> bad, good;
  c.Together([&] {
    bad = c.Pull({.variable_id = 1, .ids = Ids({5000}), .min_version = 2});
    good = c.Pull({.variable_id = 1, .ids = Ids({3}), .min_version = 2});
  });
  EXPECT_FALSE(bad.get().ok());
  EXPECT_TRUE(good.get().ok());
}

// Async with two workers: worker 0's rows were updated by worker 1 between its pull and its
// push, which the servers count as row staleness.
TEST_F(TableServerTest, AsyncRowStalenessIsReported) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kAsync, 2, 1), "tables_async");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 2);
  const Tensor ids = Ids({10, 20});
  PulledVariable early = Get(clients[0]->Pull({.variable_id = 1, .ids = ids}));
  for (int64_t i = 0; i < 3; ++i) {
    PulledVariable now = Get(clients[1]->Pull({.variable_id = 1, .ids = ids, .clock = i}));
    Get(clients[1]->Push({.variable_id = 1,
                          .version = now.version,
                          .clock = i,
                          .gradient = RandomRows(2, kDim, 5),
                          .ids = ids,
                          .pulled_updates = now.updates}));
  }
  PushReport late = Get(clients[0]->Push({.variable_id = 1,
                                          .version = early.version,
                                          .gradient = RandomRows(2, kDim, 6),
                                          .ids = ids,
                                          .pulled_updates = early.updates}));
  EXPECT_EQ(late.max_staleness, 3);
  const ServerStatsReport s = Get(clients[0]->Stats(0));
  EXPECT_EQ(s.row_staleness_histogram[3], 2u);
  EXPECT_EQ(Get(clients[1]->Pull({.variable_id = 1, .ids = Ids({})})).min_clock, 3);
  EXPECT_EQ(s.row_staleness_histogram[0], 6u);
  EXPECT_EQ(s.table_rows, 2u);
}

// A server killed after its checkpoint comes back with every row and its optimizer state: the
// next step gives the bits it gives without the kill.
TEST_F(TableServerTest, RowsSurviveAServerRestartFromItsCheckpoint) {
  std::vector<std::vector<float>> results;
  for (bool kill : {false, true}) {
    const std::string dir = ::testing::TempDir() + "tables_ckpt_" + std::to_string(kill);
    std::filesystem::remove_all(dir);
    const std::vector<std::string> extra = {"--checkpoint-dir", dir, "--checkpoint-every", "1"};
    cluster_.reset();  // a cluster's directory is named by the test: one at a time
    cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 1, 1), "tables_restart", extra);
    ASSERT_TRUE(cluster_->ok());
    auto clients = Connect(*cluster_, 1);
    TrainSync(clients, 1, 0, 2);
    if (kill) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (cluster_->Log(0).find("(version 2)") == std::string::npos &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      cluster_->Restart(0, extra);
      ASSERT_TRUE(cluster_->ok());
      clients.clear();
      clients.push_back(cluster_->MakeClient(0));
      EXPECT_EQ(Get(clients[0]->Register(Model(), kSignature)), 2) << "restored at version 2";
    }
    TrainSync(clients, 1, 2, 1);
    results.push_back(AllRows(*clients[0], 3));
    // The server writes a checkpoint after every update, also while this removes its directory
    // (which then failed: "Directory not empty"): it stops first.
    clients.clear();
    cluster_.reset();
    std::filesystem::remove_all(dir);
  }
  EXPECT_EQ(results[0], results[1]);
}

}  // namespace
}  // namespace towerps::ps
