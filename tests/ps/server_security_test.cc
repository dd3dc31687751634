// A towerps-server under attack, as a real process on tcp loopback: a flood of random and
// mutated messages against an --insecure server, the same flood against a server with a job
// secret (refused at the handshake), strangers' shutdown/push/ping, shutdown rights inside the
// job, and CURVE encryption (--encrypt).
#include <gtest/gtest.h>

#include <capnp/any.h>

#include <random>
#include <thread>

#include "common/internal/raw_peer.h"
#include "common/internal/wire_codec.h"
#include "common/transport.h"
#include "tests/ps/cluster.h"

namespace towerps::ps {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Cluster;
using testing::Get;

constexpr uint64_t kSignature = 0x5ec;
std::vector<VariableSpec> Model() { return {{"w", {1000}}}; }

JobConfig Job() {
  JobConfig j;
  j.workers = 1;
  j.servers = 1;
  return j;
}

// Registers worker 0, initialises the one variable with distinct values, returns them.
std::vector<float> Initialise(Client& c) {
  Get(c.Register(Model(), kSignature));
  Tensor init = Tensor::Empty({1000});
  for (int i = 0; i < 1000; ++i) init.f32()[i] = 0.25f * static_cast<float>(i) - 7.0f;
  EXPECT_TRUE(c.Init(0, init).get().ok());
  return std::vector<float>(init.f32(), init.f32() + 1000);
}

std::vector<float> Values(Client& c) {
  PulledVariable p = Get(c.Pull({.variable_id = 0, .min_version = 0, .clock = 0}));
  std::vector<float> out(1000);
  p.CopyTo(out.data());
  return out;
}

std::string Bytes(const zmq::message_t& m) { return m.to_string(); }

// The seeds the flood mutates: valid headers of every type a peer could send, with payloads
// that never fit the model (so nothing valid can change it), plus a header whose tensor list is
// a list of bits (the Cap'n Proto type confusion that used to crash the server).
std::vector<std::vector<std::string>> Seeds() {
  std::vector<std::vector<std::string>> seeds;
  auto add = [&](OutgoingMessage m) {
    std::vector<std::string> frames = {Bytes(internal::HeaderFrame(m))};
    for (const Tensor& t : m.tensors()) {
      frames.emplace_back(static_cast<const char*>(t.raw_data()), t.byte_size());
    }
    seeds.push_back(std::move(frames));
  };
  for (auto type :
       {proto::MessageType::PING, proto::MessageType::STATS, proto::MessageType::PULL,
        proto::MessageType::SHUTDOWN, proto::MessageType::PONG, proto::MessageType::ERROR}) {
    OutgoingMessage m(type);
    m.header().setStatusMessage("hello");
    add(std::move(m));
  }
  {
    OutgoingMessage m(proto::MessageType::REGISTER);
    auto v = m.header().initVariables(1)[0];
    v.setName("w");
    v.initShape(1).set(0, 1000);
    m.header().initConfigFields(1)[0].setName("lr");
    add(std::move(m));
  }
  for (auto type : {proto::MessageType::PUSH, proto::MessageType::INIT}) {
    OutgoingMessage m(type);
    m.AddTensor(Tensor::Zeros({7}), 0, 0);  // 7 elements: never the chunk's 1000
    add(std::move(m));
  }
  {
    capnp::MallocMessageBuilder b;
    auto h = b.initRoot<proto::Header>();
    h.setType(proto::MessageType::PUSH);
    capnp::AnyStruct::Builder(kj::mv(h)).getPointerSection()[0].initAs<capnp::List<bool>>(5);
    auto words = capnp::messageToFlatArray(b);
    seeds.push_back({std::string(reinterpret_cast<const char*>(words.begin()),
                                 words.size() * sizeof(capnp::word))});
  }
  return seeds;
}

// One hostile message: random frames, bit flips of a seed, frames dropped or added, or a seed
// whose tensor metadata declares absurd shapes and sizes.
std::vector<std::string> Mutant(const std::vector<std::vector<std::string>>& seeds,
                                std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  switch (pick(4)) {
    case 0: {  // random frames
      std::vector<std::string> frames(1 + pick(6));
      for (auto& f : frames) {
        f.resize(pick(3) == 0 ? 8 * pick(40) : pick(300));
        for (char& c : f) c = static_cast<char>(rng());
      }
      return frames;
    }
    case 1: {  // bit flips in a valid header
      std::vector<std::string> frames = seeds[pick(seeds.size())];
      for (size_t k = 1 + pick(8); k > 0 && !frames[0].empty(); --k) {
        frames[0][pick(frames[0].size())] ^= static_cast<char>(1u << pick(8));
      }
      return frames;
    }
    case 2: {  // a valid header with too few or too many payload frames
      std::vector<std::string> frames = seeds[pick(seeds.size())];
      if (pick(2) == 0 && frames.size() > 1) {
        frames.pop_back();
      } else {
        for (size_t k = 1 + pick(4); k > 0; --k) frames.emplace_back(pick(64), 'x');
      }
      return frames;
    }
    default: {  // absurd shapes and sizes
      OutgoingMessage m(pick(2) ? proto::MessageType::PUSH : proto::MessageType::INIT);
      auto meta = m.header().initTensors(1)[0];
      auto shape = meta.initShape(static_cast<unsigned>(1 + pick(9)));
      for (unsigned i = 0; i < shape.size(); ++i) {
        shape.set(i, static_cast<int64_t>(rng()) >> pick(63));
      }
      meta.setPayloadBytes(rng() >> pick(64));
      meta.setDtype(static_cast<proto::DType>(pick(3)));
      return {Bytes(internal::HeaderFrame(m)), std::string(pick(4) * 4, '\0')};
    }
  }
}

// Sends `n` hostile messages from a peer without the job's secret, waiting up to `patience`
// for room in its send queue each; returns how many it could queue (a refused peer's queue
// fills and stays full).
size_t Flood(const std::string& endpoint, size_t n, uint64_t seed, milliseconds patience) {
  auto peer = internal::RawPeer::Connect(endpoint, "intruder");
  EXPECT_TRUE(peer.ok());
  const auto seeds = Seeds();
  std::mt19937_64 rng(seed);
  size_t queued = 0;
  for (size_t i = 0; i < n; ++i) {
    queued += (*peer)->Send(Mutant(seeds, rng), Deadline::After(patience)).ok();
  }
  std::this_thread::sleep_for(milliseconds(200));  // let libzmq hand over what it queued
  return queued;
}

// Stats once the server has read everything sent to it (the count stops moving), bounded.
ServerStatsReport SettledStats(Client& c) {
  ServerStatsReport st = Get(c.Stats(0));
  for (Deadline d = Deadline::After(seconds(60)); !d.expired();) {
    std::this_thread::sleep_for(milliseconds(300));
    ServerStatsReport next = Get(c.Stats(0));
    if (next.rejected_messages == st.rejected_messages &&
        next.refused_shutdowns == st.refused_shutdowns) {
      return next;
    }
    st = next;
  }
  return st;
}

constexpr size_t kFlood = 100000;

TEST(ServerSecurityTest, InsecureServerSurvivesAFloodOfHostileMessages) {
  Cluster cluster(Job(), "flood_insecure", {"--insecure"});
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  auto client = cluster.MakeClient(0);
  const std::vector<float> before = Initialise(*client);

  EXPECT_EQ(Flood(cluster.endpoints()[0], kFlood, 1, seconds(5)), kFlood);
  ServerStatsReport st = SettledStats(*client);
  EXPECT_TRUE(client->Ping(0).get().ok()) << "the server stopped answering";
  EXPECT_EQ(Values(*client), before) << "a hostile message changed the model";
  EXPECT_TRUE(cluster.server(0).running()) << cluster.Log(0);
  // Most mutants fail validation; the rest are refused by the handlers, and none applies.
  EXPECT_GT(st.rejected_messages, kFlood / 3);
  EXPECT_EQ(st.updates_applied, 0u);
  EXPECT_EQ(st.refused_shutdowns > 0, true) << "no mutant was a well-formed shutdown";
}

TEST(ServerSecurityTest, ServerWithASecretRefusesTheFloodAtTheHandshake) {
  Cluster cluster(Job(), "flood_secure");
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  auto client = cluster.MakeClient(0);
  const std::vector<float> before = Initialise(*client);

  Flood(cluster.endpoints()[0], kFlood, 1, milliseconds(0));
  ServerStatsReport st = SettledStats(*client);
  EXPECT_EQ(st.rejected_messages, 0u) << "a stranger's message reached the decoder";
  EXPECT_EQ(st.refused_shutdowns, 0u);
  EXPECT_GE(st.refused_handshakes, 1u);
  EXPECT_EQ(Values(*client), before);
  EXPECT_TRUE(cluster.server(0).running()) << cluster.Log(0);
}

// A client socket of the given security that sends `type` as `identity` and waits for a reply.
Result<IncomingMessage> Ask(const std::string& endpoint, const TransportSecurity& security,
                            const std::string& identity, proto::MessageType type) {
  TransportOptions o;
  o.security = security;
  TOWERPS_ASSIGN_OR_RETURN(auto transport, Transport::Create(o));
  TOWERPS_ASSIGN_OR_RETURN(auto socket, transport->Connect(endpoint, identity));
  OutgoingMessage m(type);
  if (type == proto::MessageType::PUSH) m.AddTensor(Tensor::Zeros({1000}), 0, 0);
  TOWERPS_RETURN_IF_ERROR(socket->Send(std::move(m), Deadline::After(seconds(2))));
  return socket->Receive(Deadline::After(seconds(2)));
}

TEST(ServerSecurityTest, StrangersGetNothingAndAreCountedAndLoggedOnce) {
  Cluster cluster(Job(), "strangers");
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  auto client = cluster.MakeClient(0);
  const std::vector<float> before = Initialise(*client);
  auto other = JobSecret::Generate();
  ASSERT_TRUE(other.ok());
  TransportSecurity wrong;
  wrong.secret = std::make_shared<const JobSecret>(*other);
  const std::string& endpoint = cluster.endpoints()[0];
  for (const TransportSecurity& stranger : {TransportSecurity{}, wrong}) {
    for (auto type :
         {proto::MessageType::SHUTDOWN, proto::MessageType::PUSH, proto::MessageType::PING}) {
      // Even claiming to be the chief.
      Result<IncomingMessage> reply = Ask(endpoint, stranger, "worker:0", type);
      EXPECT_EQ(reply.status().code(), StatusCode::kTimeout)
          << MessageTypeName(type) << " from a stranger got an answer";
    }
  }
  EXPECT_TRUE(client->Ping(0).get().ok());
  EXPECT_TRUE(cluster.server(0).running());
  EXPECT_EQ(Values(*client), before);
  ServerStatsReport st = Get(client->Stats(0));
  EXPECT_GE(st.refused_handshakes, 6u);
  EXPECT_EQ(st.rejected_messages, 0u);
  const std::string log = cluster.Log(0);
  size_t lines = 0;
  for (size_t at = 0;
       (at = log.find("refused a connection from 127.0.0.1", at)) != std::string::npos; ++at) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << "refusals are logged once per address:\n" << log;
}

TEST(ServerSecurityTest, OnlyTheChiefMayShutAServerDown) {
  Cluster cluster(Job(), "shutdown_rights");
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  const std::string& endpoint = cluster.endpoints()[0];
  Result<IncomingMessage> r1 =
      Ask(endpoint, cluster.security(), "worker:1", proto::MessageType::SHUTDOWN);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  Status refused = StatusFromHeader(r1->header());
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("only the chief"), std::string::npos) << refused.message();
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_TRUE(cluster.server(0).running());

  Result<IncomingMessage> r0 =
      Ask(endpoint, cluster.security(), "worker:0", proto::MessageType::SHUTDOWN);
  ASSERT_TRUE(r0.ok()) << r0.status().ToString();
  EXPECT_TRUE(StatusFromHeader(r0->header()).ok());
  EXPECT_EQ(cluster.server(0).Wait(Deadline::After(seconds(20))), 0) << cluster.Log(0);
}

// Where the chief stops the servers (--mpi, --slurm, --cluster), a server it asks keeps serving
// until the other workers have left (a PyTorch worker may still pull its final values), and no
// longer than its --shutdown-grace-ms.
TEST(ServerSecurityTest, TheChiefsShutdownWaitsForTheOtherWorkersToLeave) {
  JobConfig job = Job();
  job.workers = 2;
  for (const bool leaves : {true, false}) {
    Cluster cluster(job, leaves ? "leave" : "no_leave",
                    {"--shutdown-grace-ms", leaves ? "60000" : "500"});
    ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
    const std::string& endpoint = cluster.endpoints()[0];
    Result<IncomingMessage> stranger =
        Ask(endpoint, cluster.security(), "worker:7", proto::MessageType::LEAVE);
    ASSERT_TRUE(stranger.ok()) << stranger.status().ToString();
    const Status refused = StatusFromHeader(stranger->header());
    EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find("worker:7, which is not one of the job's 2 workers"),
              std::string::npos)
        << refused.message();
    Result<IncomingMessage> chief =
        Ask(endpoint, cluster.security(), "worker:0", proto::MessageType::SHUTDOWN);
    ASSERT_TRUE(chief.ok()) << chief.status().ToString();
    EXPECT_TRUE(StatusFromHeader(chief->header()).ok());
    if (leaves) {
      std::this_thread::sleep_for(milliseconds(300));
      ASSERT_TRUE(cluster.server(0).running()) << "stopped before worker:1 left";
      Result<IncomingMessage> ping =
          Ask(endpoint, cluster.security(), "worker:1", proto::MessageType::PING);
      EXPECT_TRUE(ping.ok()) << ping.status().ToString();
      Result<IncomingMessage> left =
          Ask(endpoint, cluster.security(), "worker:1", proto::MessageType::LEAVE);
      ASSERT_TRUE(left.ok()) << left.status().ToString();
      EXPECT_TRUE(StatusFromHeader(left->header()).ok());
    }
    EXPECT_EQ(cluster.server(0).Wait(Deadline::After(seconds(20))), 0) << cluster.Log(0);
    EXPECT_EQ(cluster.Log(0).find("without worker:1 having left") != std::string::npos, !leaves)
        << cluster.Log(0);
  }
}

TEST(ServerSecurityTest, EncryptedServerServesItsJobAndRefusesPlainPeers) {
  Cluster cluster(Job(), "encrypt", {"--encrypt"});
  ASSERT_TRUE(cluster.ok()) << cluster.Log(0);
  TransportSecurity curve = cluster.security();
  curve.encrypt = true;
  Result<IncomingMessage> pong =
      Ask(cluster.endpoints()[0], curve, "worker:0", proto::MessageType::PING);
  ASSERT_TRUE(pong.ok()) << pong.status().ToString() << "\n" << cluster.Log(0);
  EXPECT_EQ(pong->type(), proto::MessageType::PONG);
  // The right secret over PLAIN is still the wrong mechanism for an encrypted job.
  Result<IncomingMessage> plain =
      Ask(cluster.endpoints()[0], cluster.security(), "worker:0", proto::MessageType::PING);
  EXPECT_EQ(plain.status().code(), StatusCode::kTimeout);
}

TEST(ServerSecurityTest, ServerWithoutASecretRefusesToStart) {
  SubprocessOptions o;
  o.argv = {TOWERPS_SERVER_BIN, "--port", "0"};
  o.capture_output = true;
  auto p = Subprocess::Start(o);
  ASSERT_TRUE(p.ok());
  std::string out;
  std::optional<int> code;
  for (Deadline d = Deadline::After(seconds(20)); !(code = p->Poll()) && !d.expired();) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  char buf[4096];
  for (ssize_t n; (n = read(p->output_fd(), buf, sizeof(buf))) > 0;) out.append(buf, n);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 2);
  EXPECT_NE(out.find("no job secret"), std::string::npos) << out;
  EXPECT_NE(out.find("--insecure"), std::string::npos) << out;
}

}  // namespace
}  // namespace towerps::ps
