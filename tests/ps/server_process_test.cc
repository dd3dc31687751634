// The parameter server as users run it: real towerps-server processes over tcp loopback, with
// clients as workers. 2 servers and 4 workers unless a test needs otherwise.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/internal/raw_peer.h"
#include "common/transport.h"
#include "tests/ps/cluster.h"
#include "tests/ps/two_variable_job.h"

namespace towerps::ps {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Check;
using testing::Cluster;
using testing::Connect;
using testing::Get;
using testing::Job;
using testing::kSignature;
using testing::Model;
using testing::PullAll;
using testing::Random;
using testing::Workers;

class ServerProcessTest : public testing::ClusterTest {};

// The second trial's workers reach the servers through shared memory (--transport shm): the same
// exact bits.
TEST_F(ServerProcessTest, SyncAveragingIsExactAndIndependentOfArrivalOrder) {
  std::vector<std::vector<float>> finals;
  for (uint32_t trial = 0; trial < 2; ++trial) {
    cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync), "sync" + std::to_string(trial));
    ASSERT_TRUE(cluster_->ok());
    const TransportPath path = trial == 0 ? TransportPath::kTcp : TransportPath::kShm;
    Workers w = Connect(*cluster_, 4, path);
    for (const ConnectionPath& p : w.clients[2]->connection_paths()) {
      EXPECT_EQ(p.shared_memory, path == TransportPath::kShm) << p.detail;
    }
    std::vector<int> order = {0, 1, 2, 3};
    std::mt19937 rng(trial + 7);
    std::vector<Tensor> grads;
    for (int r = 0; r < 4; ++r) grads.push_back(Random(Model()[0].shape, 10 + r));
    for (int step = 0; step < 2; ++step) {
      std::shuffle(order.begin(), order.end(), rng);
      for (int r : order) {
        const PushReport rep = Get(w.clients[r]->Push(
            {.variable_id = 0, .version = step, .clock = step, .gradient = grads[r]}));
        EXPECT_EQ(rep.dropped_chunks, 0);
      }
    }
    int64_t version = -1;
    std::vector<float> got = PullAll(*w.clients[1], 0, 2, &version);
    EXPECT_EQ(version, 2);
    // Expected: two SGD steps with the rank-ordered average, in float as the server does it.
    std::vector<float> expect(w.initial[0].f32(), w.initial[0].f32() + got.size());
    for (int step = 0; step < 2; ++step) {
      for (size_t i = 0; i < expect.size(); ++i) {
        const float g =
            (((grads[0].f32()[i] + grads[1].f32()[i]) + grads[2].f32()[i]) + grads[3].f32()[i]) *
            0.25f;
        expect[i] = expect[i] - 0.5f * g;
      }
    }
    ASSERT_EQ(std::memcmp(got.data(), expect.data(), got.size() * 4), 0);
    finals.push_back(got);

    // Placement agrees in every process: each server served exactly the pulls of the chunks the
    // client placed on it (a chunk asked of the wrong server is refused).
    std::vector<uint64_t> expected_pulls(2, 0);
    for (const ChunkSpec& c : w.clients[1]->placement().ChunksOf(0)) ++expected_pulls[c.server];
    for (int s = 0; s < 2; ++s) {
      ServerStatsReport st = Get(w.clients[0]->Stats(s));
      EXPECT_EQ(st.pulls_served, expected_pulls[s]) << "server " << s;
      EXPECT_GT(expected_pulls[s], 0u) << "placement left server " << s << " empty";
      EXPECT_EQ(st.stale_dropped, 0u);
    }
  }
  EXPECT_EQ(std::memcmp(finals[0].data(), finals[1].data(), finals[0].size() * 4), 0);
}

TEST_F(ServerProcessTest, TransportShmRefusesAServerItCannotShareMemoryWith) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 1, 2), "shm_refused",
                                       std::vector<std::string>{"--transport", "tcp"});
  ASSERT_TRUE(cluster_->ok());
  auto client = cluster_->MakeClient(0, seconds(20), nullptr, TransportPath::kShm);
  Result<int64_t> r = client->Register(Model(), kSignature).get();
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("--transport shm, but the connection to server "),
            std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("TCP"), std::string::npos) << r.status().ToString();
}

TEST_F(ServerProcessTest, BackupWorkerIsNotWaitedForAndItsGradientIsDropped) {
  JobConfig job = Job(UpdateMode::kSync);
  job.replicas_to_aggregate = 3;
  cluster_ = std::make_unique<Cluster>(job, "backup");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 4);
  for (int r : {2, 0, 1})
    Get(w.clients[r]->Push(
        {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, r)}));
  int64_t version = -1;
  PullAll(*w.clients[0], 1, 1, &version);  // completes without worker 3
  EXPECT_EQ(version, 1);
  const PushReport late = Get(w.clients[3]->Push(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 3)}));
  const int chunks = static_cast<int>(w.clients[3]->placement().ChunksOf(1).size());
  EXPECT_EQ(late.dropped_chunks, chunks);
  uint64_t dropped = 0;
  for (int s = 0; s < 2; ++s) dropped += Get(w.clients[0]->Stats(s)).stale_dropped;
  EXPECT_EQ(dropped, static_cast<uint64_t>(chunks));
}

// A sync worker that is done (its `leave`, after step 1) fails the step it will never push to,
// at once and naming it, rather than leaving its peers to time out on a server that is up: the
// pull already waiting for that step and a later one. Its last step is still served.
TEST_F(ServerProcessTest, SyncStepAFinishedWorkerWillNotPushToFailsAtOnceNamingIt) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2), "left");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 2);
  for (int r : {0, 1})
    Get(w.clients[r]->Push(
        {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, r)}));
  Get(w.clients[0]->Push(
      {.variable_id = 1, .version = 1, .clock = 1, .gradient = Random(Model()[1].shape, 5)}));
  auto waiting = w.clients[0]->Pull({.variable_id = 1, .min_version = 2, .clock = 0});
  EXPECT_EQ(waiting.wait_for(milliseconds(300)), std::future_status::timeout);
  for (int s = 0; s < 2; ++s) Check(w.clients[1]->Leave(s, 1));
  ASSERT_EQ(waiting.wait_for(seconds(5)), std::future_status::ready);
  const std::string why = "worker 1 finished at step 1; step 2 cannot complete without it";
  Result<PulledVariable> failed = waiting.get();
  EXPECT_EQ(failed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(failed.status().message().find(why), std::string::npos) << failed.status().ToString();
  Result<PulledVariable> later =
      w.clients[0]->Pull({.variable_id = 1, .min_version = 2, .clock = 0}).get();
  EXPECT_NE(later.status().message().find(why), std::string::npos) << later.status().ToString();
  int64_t version = -1;
  PullAll(*w.clients[0], 1, 1, &version);
  EXPECT_EQ(version, 1);
}

TEST_F(ServerProcessTest, AsyncAppliesEveryGradientAndReportsStaleness) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kAsync), "async");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 4);
  std::vector<int64_t> staleness;
  for (int r = 0; r < 4; ++r) {  // all computed from version 0
    staleness.push_back(Get(w.clients[r]->Push({.variable_id = 1,
                                                .version = 0,
                                                .clock = 0,
                                                .gradient = Random(Model()[1].shape, r)}))
                            .max_staleness);
  }
  EXPECT_EQ(staleness, (std::vector<int64_t>{0, 1, 2, 3}));
  int64_t version = -1;
  PullAll(*w.clients[0], 1, 0, &version);
  EXPECT_EQ(version, 4);
  std::vector<uint64_t> hist(4, 0);
  uint64_t applied = 0;
  for (int s = 0; s < 2; ++s) {
    ServerStatsReport st = Get(w.clients[0]->Stats(s));
    applied += st.updates_applied;
    for (int b = 0; b < 4; ++b) hist[b] += st.staleness_histogram[b];
  }
  EXPECT_EQ(applied, 4u);
  EXPECT_EQ(hist, (std::vector<uint64_t>{1, 1, 1, 1}));
}

TEST_F(ServerProcessTest, SspHoldsTheFastWorkerUntilTheSlowOneIsWithinTheBound) {
  JobConfig job = Job(UpdateMode::kSsp, 2);
  job.staleness = 1;
  cluster_ = std::make_unique<Cluster>(job, "ssp");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 2);
  Get(w.clients[0]->Push(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 1)}));
  Get(w.clients[0]->Push(
      {.variable_id = 1, .version = 1, .clock = 1, .gradient = Random(Model()[1].shape, 2)}));
  auto blocked = w.clients[0]->Pull(
      {.variable_id = 1, .min_version = 0, .clock = 2});  // clock 2: worker 1 must reach clock 1
  EXPECT_EQ(blocked.wait_for(milliseconds(400)), std::future_status::timeout);
  const auto released = std::chrono::steady_clock::now();
  Get(w.clients[1]->Push(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 3)}));
  ASSERT_EQ(blocked.wait_for(seconds(5)), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - released, seconds(2));  // and no longer
  EXPECT_TRUE(blocked.get().ok());
}

TEST_F(ServerProcessTest, CheckpointRestoresValuesAndVersionsAndRefusesCorruption) {
  JobConfig job = Job(UpdateMode::kSync, 2, 1);
  job.optimizer.kind = OptimizerKind::kAdam;  // optimizer state must survive too
  const std::string ckpt =
      (std::filesystem::temp_directory_path() / ("towerps_ckpt_" + std::to_string(getpid())))
          .string();
  std::filesystem::remove_all(ckpt);
  std::vector<std::string> extra = {"--checkpoint-dir", ckpt};
  cluster_ = std::make_unique<Cluster>(job, "ckpt", extra);
  ASSERT_TRUE(cluster_->ok());
  std::vector<float> before, after_next;
  {
    Workers w = Connect(*cluster_, 2);
    for (int step = 0; step < 3; ++step) {
      for (int r = 0; r < 2; ++r) {
        for (uint32_t v = 0; v < 2; ++v) {
          Get(w.clients[r]->Push({.variable_id = v,
                                  .version = step,
                                  .clock = step,
                                  .gradient = Random(Model()[v].shape, step * 2 + r)}));
        }
      }
    }
    before = PullAll(*w.clients[0], 0, 3);
    Check(w.clients[1]->Leave(0, 3));  // the chief's shutdown waits for the others to leave
    Check(w.clients[0]->Shutdown(0));
  }
  ASSERT_EQ(cluster_->server(0).Wait(Deadline::After(seconds(20))), std::optional<int>(0));
  ASSERT_TRUE(std::filesystem::exists(ckpt + "/ps-0.ckpt"));

  cluster_->Start(0, extra);
  ASSERT_TRUE(cluster_->ok()) << cluster_->Log(0);
  {
    auto c0 = cluster_->MakeClient(0);
    auto c1 = cluster_->MakeClient(1);
    EXPECT_EQ(Get(c0->Register(Model(), kSignature)), 3);  // workers continue from step 3
    Get(c1->Register(Model(), kSignature));
    int64_t version = -1;
    EXPECT_EQ(PullAll(*c1, 0, 0, &version), before);
    EXPECT_EQ(version, 3);
    // Adam's moments came back too: a further step from the restored state is well-formed.
    for (int r = 0; r < 2; ++r)
      Get((r ? c1 : c0)
              ->Push({.variable_id = 0,
                      .version = 3,
                      .clock = 3,
                      .gradient = Random(Model()[0].shape, 50 + r)}));
    after_next = PullAll(*c0, 0, 4);
    EXPECT_NE(after_next, before);
    Check(c1->Leave(0, 4));
    Check(c0->Shutdown(0));
  }
  ASSERT_EQ(cluster_->server(0).Wait(Deadline::After(seconds(20))), std::optional<int>(0));

  // Corrupt one byte in the middle: the server must refuse to start rather than half-load.
  const std::string path = ckpt + "/ps-0.ckpt";
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x40;
  std::ofstream(path, std::ios::binary) << bytes;
  cluster_->Start(0, extra);
  EXPECT_FALSE(cluster_->ok());
  EXPECT_EQ(cluster_->server(0).Wait(Deadline::After(seconds(20))), std::optional<int>(1));
  EXPECT_NE(cluster_->Log(0).find("CRC mismatch"), std::string::npos) << cluster_->Log(0);
  std::filesystem::remove_all(ckpt);
}

TEST_F(ServerProcessTest, AbsentServerTimesOutWithinTheDeadlineNamingIt) {
  JobConfig job = Job(UpdateMode::kSync, 1, 1);
  cluster_ = std::make_unique<Cluster>(job, "absent");
  ASSERT_TRUE(cluster_->ok());
  const std::string endpoint = cluster_->endpoints()[0];
  cluster_->server(0).Signal(SIGKILL);
  cluster_->server(0).Wait(Deadline::After(seconds(10)));
  auto client = cluster_->MakeClient(0, milliseconds(500));
  const auto start = std::chrono::steady_clock::now();
  Status s = client->Ping(0).get();
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_NE(s.message().find("server 0 (" + endpoint + ")"), std::string::npos) << s.message();
  EXPECT_GE(elapsed, milliseconds(450));
  EXPECT_LT(elapsed, seconds(3));
}

// A sync step that waits past the RPC deadline for a worker that never pushes: the error says
// the server is up and holding the request (it answered the pings), not that it may be down.
TEST_F(ServerProcessTest, ATimeoutOnALiveServerSaysItWaitsForTheOtherWorkers) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 1), "waits");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 2);
  auto client = cluster_->MakeClient(0, milliseconds(1500));
  Get(client->Register(Model(), kSignature));
  Get(client->Push(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 0)}));
  Result<PulledVariable> r = client->Pull({.variable_id = 1, .min_version = 1, .clock = 0}).get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_NE(r.status().message().find("though it answered a ping"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("another worker is slow or has stopped"), std::string::npos)
      << r.status().message();
}

TEST_F(ServerProcessTest, ServerDyingMidRunTurnsIntoATimeoutNamingIt) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync), "dies");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 4);
  auto client = cluster_->MakeClient(0, milliseconds(800));
  Get(client->Register(Model(), kSignature));
  PullAll(*client, 0, 0);  // healthy first
  const std::string endpoint = cluster_->endpoints()[1];
  cluster_->server(1).Signal(SIGKILL);
  const auto start = std::chrono::steady_clock::now();
  auto r = client->Pull({.variable_id = 0, .min_version = 0, .clock = 0})
               .get();  // variable 0 has chunks on both servers
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kTimeout);
  EXPECT_NE(r.status().message().find("server 1 (" + endpoint + ")"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("is it running and reachable?"), std::string::npos)
      << r.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(3));
}

TEST_F(ServerProcessTest, MismatchedConfigurationIsRefusedNamingTheField) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync), "mismatch");
  ASSERT_TRUE(cluster_->ok());
  JobConfig other = Job(UpdateMode::kSync);
  other.optimizer.learning_rate = 0.25f;
  auto client = cluster_->MakeClient(0, seconds(10), &other);
  auto r = client->Register(Model(), kSignature).get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("--lr is 0.25 at worker 0 but 0.5 at server"),
            std::string::npos)
      << r.status().message();

  auto good = cluster_->MakeClient(1);
  ASSERT_TRUE(good->Register(Model(), kSignature).get().ok());
  auto wrong_model = cluster_->MakeClient(2);
  auto m = wrong_model->Register({{"w", {300, 101}}, {"b", {100}}}, kSignature + 1).get();
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("model mismatch"), std::string::npos) << m.status().message();
}

TEST_F(ServerProcessTest, BadRequestsGetErrorsAndLeaveStateIntact) {
  // Insecure: this test plays a job member that sends bad requests, and raw garbage.
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 1, 1), "badinput",
                                       std::vector<std::string>{"--insecure"});
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 1);
  const std::vector<float> before = PullAll(*w.clients[0], 1, 0);

  auto transport = Transport::Create({});
  ASSERT_TRUE(transport.ok());
  auto raw = (*transport)->Connect(cluster_->endpoints()[0], "intruder");
  ASSERT_TRUE(raw.ok());
  Socket& sock = **raw;
  auto request = [&](OutgoingMessage m) {
    m.header().setSenderRank(0);
    m.header().setRequestId(99);
    EXPECT_TRUE(sock.Send(std::move(m), Deadline::After(seconds(5))).ok());
    auto reply = sock.Receive(Deadline::After(seconds(5)));
    EXPECT_TRUE(reply.ok()) << "the server did not answer";
    return reply.ok() ? StatusFromHeader(reply->header()) : reply.status();
  };
  {  // wrong gradient size for variable 1 chunk 0
    OutgoingMessage m(proto::MessageType::PUSH);
    m.header().setVariableId(1);
    m.AddTensor(Tensor::Zeros({7}), 1, 0);
    Status s = request(std::move(m));
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("has 7 elements, expected 100"), std::string::npos) << s.message();
  }
  {  // a chunk nobody holds
    OutgoingMessage m(proto::MessageType::PULL);
    m.header().setVariableId(42);
    Status s = request(std::move(m));
    EXPECT_EQ(s.code(), StatusCode::kNotFound);
  }
  {  // a gradient from the future
    OutgoingMessage m(proto::MessageType::PUSH);
    m.header().setVariableId(1);
    m.header().setVersion(5);
    m.AddTensor(Tensor::Zeros({100}), 1, 0);
    EXPECT_EQ(request(std::move(m)).code(), StatusCode::kInvalidArgument);
  }
  {  // a message type servers do not take
    EXPECT_EQ(request(OutgoingMessage(proto::MessageType::PULL_REPLY)).code(),
              StatusCode::kInvalidArgument);
  }
  // Garbage at the socket level is dropped and counted; the server keeps serving.
  auto garbage = internal::RawPeer::Connect(cluster_->endpoints()[0], "");
  ASSERT_TRUE(garbage.ok()) << garbage.status().ToString();
  ASSERT_TRUE((*garbage)->Send({"not a capnp header"}).ok());

  EXPECT_EQ(PullAll(*w.clients[0], 1, 0), before);  // nothing changed
  Get(w.clients[0]->Push(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 9)}));
  int64_t version = -1;
  PullAll(*w.clients[0], 1, 1, &version);
  EXPECT_EQ(version, 1);  // still serving normally
  // The garbage came over another connection: wait (bounded) until the server has read it.
  ServerStatsReport st = Get(w.clients[0]->Stats(0));
  for (Deadline d = Deadline::After(seconds(5)); st.rejected_messages == 0 && !d.expired();) {
    std::this_thread::sleep_for(milliseconds(10));
    st = Get(w.clients[0]->Stats(0));
  }
  EXPECT_EQ(st.rejected_messages, 1u);
  EXPECT_EQ(st.updates_applied, 1u);
  EXPECT_TRUE(cluster_->server(0).running());
}

}  // namespace
}  // namespace towerps::ps
