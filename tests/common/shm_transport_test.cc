// Payloads through shared memory between two transports (as between two processes on one host):
// when they go by reference and when by frame, zero copies from the arena, loans ended by the
// receiver's releases and by a restarted peer, TCP with a --transport tcp peer, and forged
// offsets, lengths and arenas refused with the socket still usable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <random>
#include <thread>

#include "common/internal/shm_links.h"
#include "common/internal/wire_codec.h"
#include "common/shm_arena.h"
#include "common/transport.h"
#include "tests/testing/status_assert.h"

namespace towerps {
namespace {

using std::chrono::seconds;

Deadline Soon() { return Deadline::After(seconds(20)); }

void FillRandom(const Tensor& t, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = u(rng);
}

bool SameBytes(const Tensor& a, const Tensor& b) {
  return a.byte_size() == b.byte_size() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

// A client process and a server process, each with its own transport (and arena).
struct Processes {
  std::unique_ptr<Transport> client_side, server_side;
  std::unique_ptr<Socket> server, client;
};

Processes Make(TransportPath client_path, TransportPath server_path) {
  TransportOptions c, s;
  c.path = client_path;
  s.path = server_path;
  c.shm_arena_bytes = s.shm_arena_bytes = 64 << 20;
  Processes p;
  p.client_side = Transport::Create(c).value();
  p.server_side = Transport::Create(s).value();
  p.server = p.server_side->Listen("tcp://127.0.0.1:0").value();
  p.client = p.client_side->Connect(p.server->endpoint(), "worker:0").value();
  return p;
}

// Client -> server with `payload`; the server replies with `reply` (if defined). Returns what the
// server received; the reply goes to `reply_out`.
IncomingMessage RoundTrip(Processes& p, const Tensor& payload, const Tensor& reply = Tensor(),
                          std::optional<IncomingMessage>* reply_out = nullptr) {
  OutgoingMessage m(proto::MessageType::PUSH);
  if (payload.defined()) m.AddTensor(payload, 1, 0);
  EXPECT_OK(p.client->Send(std::move(m), Soon()));
  Result<IncomingMessage> in = p.server->Receive(Soon());
  EXPECT_OK(in.status());
  OutgoingMessage r(proto::MessageType::PUSH_REPLY);
  r.set_peer(in->peer());
  if (reply.defined()) r.AddTensor(reply, 1, 0);
  EXPECT_OK(p.server->Send(std::move(r), Soon()));
  Result<IncomingMessage> back = p.client->Receive(Soon());
  EXPECT_OK(back.status());
  if (reply_out != nullptr) reply_out->emplace(std::move(*back));
  return std::move(*in);
}

// Buffers a device pins take whole pages: page-aligned and padded, so no two share one, between
// 64-byte-aligned neighbours; every byte comes back to the arena when they go.
TEST(ShmArenaTest, PageAlignedBlocksShareNoPage) {
  ASSERT_OK_AND_ASSIGN(auto arena, ShmArena::Create(1 << 20));
  const uintptr_t page = HostPageBytes();
  {
    std::vector<Tensor> blocks;
    for (int i = 0; i < 6; ++i) {
      blocks.push_back(arena->Allocate({7 + i}));  // small, 64-byte aligned
      blocks.push_back(arena->Allocate({100 + 300 * i}, DType::kFloat32, page));
    }
    for (size_t i = 1; i < blocks.size(); i += 2) {
      const auto start = reinterpret_cast<uintptr_t>(blocks[i].raw_data());
      ASSERT_TRUE(blocks[i].defined());
      EXPECT_EQ(start % page, 0u) << i;
      const uintptr_t end = start + blocks[i].byte_size();
      for (size_t j = 0; j < blocks.size(); ++j) {  // no other block within its pages
        if (j == i) continue;
        const auto other = reinterpret_cast<uintptr_t>(blocks[j].raw_data());
        const uintptr_t last_page = (end + page - 1) / page * page;
        EXPECT_FALSE(other >= start && other < last_page) << i << " and " << j;
      }
    }
    EXPECT_GT(arena->bytes_in_use(), 0u);
  }
  EXPECT_EQ(arena->bytes_in_use(), 0u);
  // The gaps left before aligned blocks are reused: the arena fills as before.
  std::vector<Tensor> fill;
  while (true) {
    Tensor t = arena->Allocate({1000});
    if (!t.defined()) break;
    fill.push_back(std::move(t));
  }
  EXPECT_GE(fill.size(), static_cast<size_t>((1 << 20) / 4032));
  const Tensor heap = Tensor::Empty({5}, DType::kFloat32, page);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(heap.raw_data()) % page, 0u);
}

TEST(ShmTransportTest, PayloadsGoByReferenceOnceBothSidesMappedTheArenas) {
  Processes p = Make(TransportPath::kAuto, TransportPath::kAuto);
  Tensor grad = p.client_side->Allocate({300000});
  FillRandom(grad, 1);
  // The first message carries the offer; nothing is mapped yet, so the payload is a frame.
  IncomingMessage first = RoundTrip(p, grad);
  EXPECT_EQ(first.shared_payloads(), 0u);
  EXPECT_TRUE(SameBytes(first.tensors()[0], grad));
  // The reply acknowledged the client's arena: from now on, by reference, read in place.
  EXPECT_TRUE(p.client->PathTo("").shared_memory) << p.client->PathTo("").detail;
  EXPECT_EQ(p.client->PathTo("").local_pid, getpid());  // both ends are this test's
  IncomingMessage second = RoundTrip(p, grad);
  ASSERT_EQ(second.shared_payloads(), 1u);
  EXPECT_TRUE(SameBytes(second.tensors()[0], grad));
  EXPECT_EQ(p.client->stats().shm_copies, 0u) << "an arena tensor must not be copied";
  // A heap tensor is copied into the arena once; a small one goes as a frame.
  Tensor heap = Tensor::Empty({100000});
  FillRandom(heap, 2);
  IncomingMessage third = RoundTrip(p, heap);
  EXPECT_EQ(third.shared_payloads(), 1u);
  EXPECT_TRUE(SameBytes(third.tensors()[0], heap));
  EXPECT_EQ(p.client->stats().shm_copies, 1u);
  Tensor small = Tensor::Empty({16});
  FillRandom(small, 3);
  IncomingMessage fourth = RoundTrip(p, small);
  EXPECT_EQ(fourth.shared_payloads(), 0u);
  EXPECT_TRUE(SameBytes(fourth.tensors()[0], small));
  // The other way too: the server's reply goes through its arena.
  Tensor values = p.server_side->Allocate({200000});
  FillRandom(values, 4);
  std::optional<IncomingMessage> reply;
  RoundTrip(p, Tensor(), values, &reply);
  ASSERT_EQ(reply->shared_payloads(), 1u);
  EXPECT_TRUE(SameBytes(reply->tensors()[0], values));
  EXPECT_GT(p.server->stats().shm_payloads_out, 0u);
}

TEST(ShmTransportTest, ALoanEndsWhenTheReceiverDropsThePayload) {
  Processes p = Make(TransportPath::kAuto, TransportPath::kAuto);
  Tensor grad = p.client_side->Allocate({300000});
  FillRandom(grad, 5);
  RoundTrip(p, grad);  // handshake
  std::optional<IncomingMessage> held(RoundTrip(p, grad));
  ASSERT_EQ(held->shared_payloads(), 1u);
  // The server holds the payload: the client must see its buffer as shared (copy-on-write).
  EXPECT_GT(grad.storage().use_count(), 1);
  RoundTrip(p, Tensor());
  EXPECT_GT(grad.storage().use_count(), 1) << "released while the server still holds it";
  held.reset();  // drops the payload; the release rides on the next message to the client
  RoundTrip(p, Tensor());
  EXPECT_EQ(grad.storage().use_count(), 1);
}

TEST(ShmTransportTest, ATcpPeerAlwaysGetsFrames) {
  for (auto [client, server] : {std::pair{TransportPath::kTcp, TransportPath::kAuto},
                                std::pair{TransportPath::kAuto, TransportPath::kTcp}}) {
    Processes p = Make(client, server);
    Tensor grad = p.client_side->Allocate({300000});
    FillRandom(grad, 6);
    Tensor values = p.server_side->Allocate({300000});
    FillRandom(values, 7);
    for (int i = 0; i < 3; ++i) {
      std::optional<IncomingMessage> reply;
      IncomingMessage in = RoundTrip(p, grad, values, &reply);
      EXPECT_EQ(in.shared_payloads(), 0u);
      EXPECT_EQ(reply->shared_payloads(), 0u);
      EXPECT_TRUE(SameBytes(in.tensors()[0], grad));
      EXPECT_TRUE(SameBytes(reply->tensors()[0], values));
    }
    EXPECT_FALSE(p.client->PathTo("").shared_memory);
    EXPECT_NE(p.client->PathTo("").detail.find("TCP"), std::string::npos);
  }
}

TEST(ShmTransportTest, APeerRestartedWithoutSharedMemoryGetsFrames) {
  Processes p = Make(TransportPath::kAuto, TransportPath::kAuto);
  Tensor values = p.server_side->Allocate({200000});
  FillRandom(values, 8);
  std::optional<IncomingMessage> reply;
  RoundTrip(p, Tensor());
  RoundTrip(p, Tensor(), values, &reply);
  ASSERT_EQ(reply->shared_payloads(), 1u);
  reply.reset();
  // The worker restarts with --transport tcp under the same identity: its messages carry no
  // ShmInfo, so the server must take its loans back and send frames.
  TransportOptions tcp;
  tcp.path = TransportPath::kTcp;
  p.client.reset();
  p.client_side = Transport::Create(tcp).value();
  p.client = p.client_side->Connect(p.server->endpoint(), "worker:0").value();
  RoundTrip(p, Tensor(), values, &reply);
  EXPECT_EQ(reply->shared_payloads(), 0u);
  EXPECT_TRUE(SameBytes(reply->tensors()[0], values));
  reply.reset();
  // The frames of that reply were sent without a copy: ZeroMQ's I/O thread lets go of them once
  // written, which may be just after the worker read them. A loan never taken back stays.
  const Deadline deadline = Deadline::After(std::chrono::seconds(5));
  while (values.storage().use_count() > 1 && !deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(values.storage().use_count(), 1) << "the loan to the dead worker was not taken back";
}

TEST(ShmTransportTest, ARestartedServerIsNotLentWhatWasLentToItsPredecessor) {
  Processes p = Make(TransportPath::kAuto, TransportPath::kAuto);
  Tensor grad = p.client_side->Allocate({300000});
  FillRandom(grad, 9);
  RoundTrip(p, grad);
  ASSERT_EQ(RoundTrip(p, grad).shared_payloads(), 1u);
  // The server process is replaced by a new one on the same port.
  const std::string endpoint = p.server->endpoint();
  p.server.reset();
  p.server_side.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  TransportOptions s;
  s.path = TransportPath::kAuto;
  p.server_side = Transport::Create(s).value();
  p.server = p.server_side->Listen(endpoint).value();
  // What the client sends the new server is read, not refused as lent to the old one.
  IncomingMessage first = RoundTrip(p, grad);
  EXPECT_TRUE(SameBytes(first.tensors()[0], grad));
  EXPECT_EQ(RoundTrip(p, grad).shared_payloads(), 1u) << "lending did not resume";
}

// A message from a hostile or confused peer that claims a payload in its arena: built here and
// decoded as the receiving socket would, against a real mapped arena.
class ForgedSharedPayloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    arena_ = *ShmArena::Create(1 << 20);
    receiver_ = *ShmArena::Create(1 << 20);
    links_ = std::make_unique<internal::ShmLinks>(receiver_);
  }
  // A message lending one payload of `elements` floats at `offset` of arena_, which it names
  // with `nonce` (0: the right one), to the receiver whose arena nonce is `to` (0: links_).
  Result<IncomingMessage> Decode(uint64_t offset, int64_t elements, uint64_t nonce = 0,
                                 internal::ShmLinks* links = nullptr, uint64_t to = 0) {
    OutgoingMessage m(proto::MessageType::PUSH);
    Tensor t = arena_->Allocate({elements});
    m.AddTensor(t, 1, 0);
    m.MarkShared(0, t, /*ref=*/7, offset);
    auto info = m.header().initShm();
    const ArenaAddress& a = arena_->address();
    info.setHost(a.host);
    info.setPid(static_cast<uint32_t>(a.pid));
    info.setFd(a.fd);
    info.setNonce(nonce ? nonce : a.nonce);
    info.setBytes(a.bytes);
    info.setMapped(to ? to : receiver_->address().nonce);
    std::vector<zmq::message_t> frames;
    frames.push_back(internal::HeaderFrame(m));
    return internal::DecodeMessage("worker:0", std::move(frames), WireLimits{},
                                   links ? links : links_.get());
  }
  uint64_t Good() { return *arena_->OffsetOf(arena_->Allocate({1000})); }

  std::shared_ptr<ShmArena> arena_, receiver_;
  std::unique_ptr<internal::ShmLinks> links_;
};

TEST_F(ForgedSharedPayloadTest, AnHonestOneResolves) {
  ASSERT_OK_AND_ASSIGN(IncomingMessage m, Decode(Good(), 1000));
  EXPECT_EQ(m.shared_payloads(), 1u);
}

TEST_F(ForgedSharedPayloadTest, OffsetsAndLengthsOutsideTheArenaAreRefused) {
  const uint64_t size = arena_->address().bytes;
  for (uint64_t offset : {uint64_t{0}, uint64_t{64}, size, size + 4096, ~uint64_t{0} - 63}) {
    Result<IncomingMessage> m = Decode(offset, 16);
    EXPECT_EQ(m.status().code(), StatusCode::kProtocol) << offset;
  }
  // In bounds at the start, but the length runs past the end.
  Result<IncomingMessage> m = Decode(size - 64, 1000);
  EXPECT_EQ(m.status().code(), StatusCode::kProtocol);
  EXPECT_NE(m.status().message().find("outside the sender's arena"), std::string::npos)
      << m.status().ToString();
  // Misaligned for its dtype.
  Result<IncomingMessage> misaligned = Decode(Good() + 2, 16);
  EXPECT_EQ(misaligned.status().code(), StatusCode::kProtocol);
  // The links still serve an honest message after all that.
  Result<IncomingMessage> honest = Decode(Good(), 1000);
  EXPECT_OK(honest.status());
}

TEST_F(ForgedSharedPayloadTest, AnArenaThatIsNotMappedIsRefused) {
  // The address names the arena with a wrong nonce: it is not mapped, and payloads in it refused.
  Result<IncomingMessage> m = Decode(Good(), 16, /*nonce=*/12345);
  EXPECT_EQ(m.status().code(), StatusCode::kProtocol);
  EXPECT_NE(m.status().message().find("not mapped"), std::string::npos) << m.status().ToString();
  EXPECT_FALSE(links_->PathTo("worker:0").shared_memory);
  EXPECT_NE(links_->PathTo("worker:0").detail.find("nonce"), std::string::npos)
      << links_->PathTo("worker:0").detail;
  // A socket without shared memory refuses them too.
  internal::ShmLinks tcp(nullptr);
  Result<IncomingMessage> refused = Decode(Good(), 16, 0, &tcp);
  EXPECT_EQ(refused.status().code(), StatusCode::kProtocol);
}

TEST_F(ForgedSharedPayloadTest, ALoanForAnEarlierIncarnationIsNotRead) {
  // A message queued for this process's predecessor (another arena nonce) reaches it.
  Result<IncomingMessage> m = Decode(Good(), 16, 0, nullptr, /*to=*/receiver_->address().nonce + 1);
  EXPECT_EQ(m.status().code(), StatusCode::kProtocol);
  EXPECT_NE(m.status().message().find("earlier process"), std::string::npos)
      << m.status().ToString();
}

TEST(ShmArenaTest, BlocksReturnAndCoalesce) {
  auto arena = *ShmArena::Create(1 << 20);
  std::vector<Tensor> held;
  for (int i = 0; i < 16; ++i) held.push_back(arena->Allocate({16000}));  // 64000 B each
  for (const Tensor& t : held) ASSERT_TRUE(t.defined());
  EXPECT_FALSE(arena->Allocate({300000}).defined()) << "the arena should be full";
  held.clear();
  EXPECT_EQ(arena->bytes_in_use(), 0u);
  EXPECT_TRUE(arena->Allocate({250000}).defined()) << "freed blocks did not coalesce";
}

}  // namespace
}  // namespace towerps
