// A real towerps-server checkpointing to a disk that fills up (a small tmpfs): a failed periodic
// checkpoint keeps the previous one and the server keeps serving; a failed final checkpoint makes
// the server exit non-zero; once space is back, a restart resumes from the kept checkpoint.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/transport.h"
#include "ps/server/checkpoint.h"
#include "tests/ps/cluster.h"
#include "tests/testing/small_tmpfs.h"

namespace towerps::ps {
namespace {

using testing::Check;
using testing::Get;

using std::chrono::seconds;

constexpr int64_t kFloats = 32 * 1024;  // 128 KiB: one chunk, a checkpoint of about 128 KiB
constexpr uint64_t kSignature = 0x5eed;

std::vector<VariableSpec> Model() { return {{"w", {kFloats}}}; }

Tensor Filled(float v) {
  Tensor t = Tensor::Empty({kFloats});
  for (int64_t i = 0; i < kFloats; ++i) t.f32()[i] = v + 1e-4f * static_cast<float>(i % 101);
  return t;
}

std::vector<float> Pull(Client& c, int64_t min_version, int64_t* version) {
  PulledVariable p = Get(c.Pull({.variable_id = 0, .min_version = min_version, .clock = 0}));
  *version = p.version;
  std::vector<float> out(kFloats);
  p.CopyTo(out.data());
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One server, one chunk, plain SGD at lr 0.5, sync.
JobConfig SgdJob(int workers) {
  JobConfig job;
  job.workers = workers;
  job.servers = 1;
  job.partition_bytes = kFloats * 4;
  job.optimizer.kind = OptimizerKind::kSgd;
  job.optimizer.learning_rate = 0.5f;
  job.schedule.kind = LrScheduleKind::kConstant;
  return job;
}

// Waits up to 20 s for `text` in server 0's log.
// Whether `path` is absent within 20 s: a checkpoint attempt in progress holds its temporary
// file until it fails; none may be left after.
bool GoneSoon(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

bool LogShows(const testing::Cluster& cluster, const std::string& text) {
  const auto deadline = std::chrono::steady_clock::now() + seconds(20);
  while (cluster.Log(0).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(ServerCheckpointTest, FullDiskKeepsThePreviousCheckpointServingGoesOnAndTheExitFails) {
  ::towerps::testing::SmallTmpfs disk("server_ckpt", 1024 * 1024);
  if (!disk.mounted()) GTEST_SKIP() << disk.error();
  const JobConfig job = SgdJob(1);
  const std::vector<std::string> extra = {"--checkpoint-dir", disk.dir(), "--checkpoint-every",
                                          "1"};
  const std::string path = CheckpointPath(disk.dir(), 0);
  testing::Cluster cluster(job, "diskfull", extra);
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);

  std::vector<float> at_one;
  {
    auto c = cluster.MakeClient(0);
    Get(c->Register(Model(), kSignature));
    Check(c->Init(0, Filled(1.0f)));
    Get(c->Push({.variable_id = 0, .version = 0, .clock = 0, .gradient = Filled(0.1f)}));
    int64_t version = -1;
    at_one = Pull(*c, 1, &version);
    ASSERT_EQ(version, 1);
    ASSERT_TRUE(LogShows(cluster, "(version 1)")) << cluster.Log(0);
    const std::string kept = Slurp(path);
    ASSERT_GT(kept.size(), static_cast<size_t>(kFloats * 4));

    // The disk fills up: the next checkpoints cannot fit.
    ASSERT_TRUE(disk.FillLeaving(16 * 1024));
    for (int64_t step = 1; step <= 3; ++step)
      Get(c->Push({.variable_id = 0, .version = step, .clock = step, .gradient = Filled(0.1f)}));
    ASSERT_TRUE(LogShows(cluster, "checkpoint failed (serving goes on)")) << cluster.Log(0);
    EXPECT_NE(cluster.Log(0).find("ENOSPC"), std::string::npos) << cluster.Log(0);

    // Still serving, with the updates applied.
    EXPECT_TRUE(c->Ping(0).get().ok());
    Get(c->Push({.variable_id = 0, .version = 4, .clock = 4, .gradient = Filled(0.1f)}));
    const std::vector<float> at_five = Pull(*c, 5, &version);
    EXPECT_EQ(version, 5);
    EXPECT_NE(at_five, at_one);

    // The kept checkpoint is the same bytes, loads, and no temporary file is left.
    EXPECT_EQ(Slurp(path), kept);
    auto ck = LoadCheckpoint(path);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    ASSERT_EQ(ck->chunks.size(), 1u);
    EXPECT_EQ(ck->chunks[0].version, 1);
    EXPECT_TRUE(GoneSoon(path + ".tmp"));

    // The final checkpoint fails too: the server must not exit 0.
    Check(c->Shutdown(0));
  }
  EXPECT_EQ(cluster.server(0).Wait(Deadline::After(seconds(20))), std::optional<int>(1));
  EXPECT_NE(cluster.Log(0).find("final checkpoint to --checkpoint-dir " + disk.dir() + " failed"),
            std::string::npos)
      << cluster.Log(0);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  // With space back, a restart resumes from the kept checkpoint (version 1).
  disk.Free();
  cluster.Start(0, extra);
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  auto c = cluster.MakeClient(0);
  EXPECT_EQ(Get(c->Register(Model(), kSignature)), 1);
  int64_t version = -1;
  EXPECT_EQ(Pull(*c, 0, &version), at_one);
  EXPECT_EQ(version, 1);
  Check(c->Shutdown(0));
  EXPECT_EQ(cluster.server(0).Wait(Deadline::After(seconds(20))), std::optional<int>(0));
}

// A server killed and restarted on its port (as towerps-launch does with --checkpoint-dir) comes
// back from its checkpoint; a client with a call outstanding there learns it at once (its
// liveness ping reaches the new server, whose replies carry a new incarnation): the call fails
// with kNetwork saying so, long before its deadline, and the restart is counted. The restored
// version is then served as usual.
TEST(ServerCheckpointTest, RestartedServerFailsOutstandingCallsAtOnceAndServesItsCheckpoint) {
  const JobConfig job = SgdJob(2);
  testing::Cluster cluster(job, "restart", {});
  const std::vector<std::string> extra = {"--checkpoint-dir", cluster.dir() + "/ckpt",
                                          "--checkpoint-every", "1"};
  cluster.Restart(0, extra);  // now with checkpoints, on the same port
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  auto c0 = cluster.MakeClient(0, seconds(30));
  auto c1 = cluster.MakeClient(1, seconds(30));
  Get(c0->Register(Model(), kSignature));
  Get(c1->Register(Model(), kSignature));
  Check(c0->Init(0, Filled(1.0f)));
  Get(c0->Push({.variable_id = 0, .version = 0, .clock = 0, .gradient = Filled(0.1f)}));
  Get(c1->Push({.variable_id = 0, .version = 0, .clock = 0, .gradient = Filled(0.2f)}));
  int64_t version = -1;
  const std::vector<float> at_one = Pull(*c0, 1, &version);
  ASSERT_EQ(version, 1);
  ASSERT_TRUE(LogShows(cluster, "(version 1)")) << cluster.Log(0);
  // Worker 0 pushes step 1 and waits for version 2, which needs worker 1: outstanding.
  Get(c0->Push({.variable_id = 0, .version = 1, .clock = 1, .gradient = Filled(0.3f)}));
  auto waiting = c0->Pull({.variable_id = 0, .min_version = 2, .clock = 0});
  ASSERT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(c0->server_restarts(), 0u);

  // The server hangs before it dies, so a liveness ping is lost with it: the next ones must
  // still go out (a lost ping expires after a second, not at the call deadline).
  cluster.server(0).Signal(SIGSTOP);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  cluster.Restart(0, extra);
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  const auto restarted = std::chrono::steady_clock::now();
  ASSERT_EQ(waiting.wait_for(seconds(10)), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - restarted, seconds(5));  // not the 30 s deadline
  const Result<PulledVariable> lost = waiting.get();
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kNetwork);
  EXPECT_NE(lost.status().message().find("restarted"), std::string::npos)
      << lost.status().message();
  EXPECT_EQ(c0->server_restarts(), 1u);
  EXPECT_NE(cluster.Log(0).find("ps-0.ckpt and 0 delta(s) after it, at version 1"),
            std::string::npos)
      << cluster.Log(0);
  // The restored version, bit for bit; step 1 starts again from there.
  EXPECT_EQ(Pull(*c0, 1, &version), at_one);
  EXPECT_EQ(version, 1);
}

// Sends `m` as worker 1 would, addressed to the server's incarnation `to` (0: none), and returns
// the reply.
Result<IncomingMessage> AskAs1(const testing::Cluster& cluster, OutgoingMessage m, uint64_t to) {
  TransportOptions o;
  o.security = cluster.security();
  TOWERPS_ASSIGN_OR_RETURN(auto transport, Transport::Create(o));
  TOWERPS_ASSIGN_OR_RETURN(auto socket, transport->Connect(cluster.endpoints()[0], "worker:1"));
  m.header().setSenderRole(proto::Role::WORKER);
  m.header().setSenderRank(1);
  m.header().setToIncarnation(to);
  TOWERPS_RETURN_IF_ERROR(socket->Send(std::move(m), Deadline::After(seconds(5))));
  return socket->Receive(Deadline::After(seconds(5)));
}

// A request written for the process a restart replaced (queued in the transport across the
// restart) must not be applied by its successor: in async mode a push whose iteration is ahead
// of the restored clock would be applied and move the worker's clock past the iterations between,
// which no worker then redoes (an async job once waited for its final version in vain). It is
// refused unread, with the new incarnation, so that its worker rejoins.
TEST(ServerCheckpointTest, ARequestWrittenForTheReplacedProcessIsRefusedUnread) {
  JobConfig job = SgdJob(2);
  job.mode = UpdateMode::kAsync;
  testing::Cluster cluster(job, "predecessor", {});
  const std::vector<std::string> extra = {"--checkpoint-dir", cluster.dir() + "/ckpt",
                                          "--checkpoint-every", "1"};
  cluster.Restart(0, extra);
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  int64_t version = -1;
  std::vector<float> at_one;
  {
    auto c0 = cluster.MakeClient(0, seconds(30));
    Get(c0->Register(Model(), kSignature));
    Check(c0->Init(0, Filled(1.0f)));
    Get(c0->Push({.variable_id = 0, .version = 0, .clock = 0, .gradient = Filled(0.1f)}));
    at_one = Pull(*c0, 1, &version);
    ASSERT_EQ(version, 1);
  }
  Result<IncomingMessage> pong = AskAs1(cluster, OutgoingMessage(proto::MessageType::PING), 0);
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  const uint64_t before = pong->header().getServerIncarnation();
  ASSERT_NE(before, 0u);
  ASSERT_TRUE(LogShows(cluster, "(version 1)")) << cluster.Log(0);
  cluster.Restart(0, extra);
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);

  OutgoingMessage push(proto::MessageType::PUSH);
  push.header().setVariableId(0);
  push.header().setChunkId(0);
  push.header().setVersion(1);
  push.header().setClock(7);
  push.AddTensor(Filled(0.5f), 0, 0);
  Result<IncomingMessage> refused = AskAs1(cluster, std::move(push), before);
  ASSERT_TRUE(refused.ok()) << refused.status().ToString();
  const Status why = StatusFromHeader(refused->header());
  EXPECT_EQ(why.code(), StatusCode::kFailedPrecondition) << why.ToString();
  EXPECT_NE(why.message().find("restarted"), std::string::npos) << why.message();
  const uint64_t after = refused->header().getServerIncarnation();
  EXPECT_NE(after, 0u);
  EXPECT_NE(after, before);
  EXPECT_NE(cluster.Log(0).find("written for this server's previous process"), std::string::npos)
      << cluster.Log(0);
  // Addressed to the process that runs, the same peer is served.
  pong = AskAs1(cluster, OutgoingMessage(proto::MessageType::PING), after);
  ASSERT_TRUE(pong.ok()) << pong.status().ToString();
  EXPECT_EQ(pong->type(), proto::MessageType::PONG);

  // Nothing of the refused push was applied: version 1, the values after worker 0's one push.
  auto c0 = cluster.MakeClient(0, seconds(30));
  Get(c0->Register(Model(), kSignature));
  EXPECT_EQ(Pull(*c0, 1, &version), at_one);
  EXPECT_EQ(version, 1);
}

}  // namespace
}  // namespace towerps::ps
