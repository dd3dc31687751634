// Transport round trips over inproc and tcp loopback, the zero-copy guarantee, deadlines, bind
// errors, and malformed input arriving over a real socket.
#include "common/transport.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "common/internal/raw_peer.h"
#include "common/internal/wire_codec.h"
#include "tests/testing/status_assert.h"

namespace towerps {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

Deadline Soon() { return Deadline::After(seconds(20)); }

Tensor RandomBytes(size_t bytes, uint32_t seed) {
  // float32 when the size allows it, so both dtypes travel.
  const bool f32 = bytes % 4 == 0;
  Tensor t = f32 ? Tensor::Empty({static_cast<int64_t>(bytes / 4)})
                 : Tensor::Empty({static_cast<int64_t>(bytes)}, DType::kUInt8);
  std::mt19937_64 rng(seed);
  auto* p = static_cast<uint8_t*>(t.raw_data());
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng() & 0x3f3f3f3f3f3f3f3full;  // finite floats, never all zero
    std::memcpy(p + i, &v, 8);
  }
  for (; i < bytes; ++i) p[i] = static_cast<uint8_t>(rng() | 1);
  return t;
}

struct Pair {
  std::unique_ptr<Transport> transport;
  std::unique_ptr<Socket> server;
  std::unique_ptr<Socket> client;
};

Result<Pair> MakePair(const std::string& endpoint, TransportOptions options = {}) {
  Pair p;
  TOWERPS_ASSIGN_OR_RETURN(p.transport, Transport::Create(options));
  TOWERPS_ASSIGN_OR_RETURN(p.server, p.transport->Listen(endpoint));
  TOWERPS_ASSIGN_OR_RETURN(p.client, p.transport->Connect(p.server->endpoint(), "client-0"));
  return p;
}

class TransportRoundTripTest : public ::testing::TestWithParam<std::tuple<std::string, size_t>> {};

TEST_P(TransportRoundTripTest, EchoPreservesHeaderAndBytes) {
  const auto& [endpoint, bytes] = GetParam();
  ASSERT_OK_AND_ASSIGN(Pair p, MakePair(endpoint));
  Tensor sent = RandomBytes(bytes, static_cast<uint32_t>(bytes));

  OutgoingMessage push(proto::MessageType::PUSH);
  push.header().setVersion(41);
  push.header().setRequestId(9);
  push.AddTensor(sent, 7, 3);
  ASSERT_TRUE(p.client->Send(std::move(push), Soon()).ok());

  auto at_server = p.server->Receive(Soon());
  ASSERT_TRUE(at_server.ok()) << at_server.status().ToString();
  EXPECT_EQ(at_server->peer(), "client-0");
  EXPECT_EQ(at_server->header().getVersion(), 41);
  ASSERT_EQ(at_server->tensors().size(), 1u);
  EXPECT_EQ(at_server->header().getTensors()[0].getVariableId(), 7u);
  EXPECT_EQ(at_server->header().getTensors()[0].getChunkId(), 3u);

  // The server forwards the received view unchanged: no copy on either hop.
  OutgoingMessage reply(proto::MessageType::PUSH_REPLY);
  reply.set_peer(at_server->peer());
  reply.header().setRequestId(at_server->header().getRequestId());
  reply.AddTensor(at_server->tensors()[0], 7, 3);
  ASSERT_TRUE(p.server->Send(std::move(reply), Soon()).ok());

  auto back = p.client->Receive(Soon());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->type(), proto::MessageType::PUSH_REPLY);
  EXPECT_EQ(back->header().getRequestId(), 9u);
  const Tensor& got = back->tensors().at(0);
  ASSERT_EQ(got.byte_size(), bytes);
  EXPECT_EQ(got.dtype(), sent.dtype());
  EXPECT_EQ(std::memcmp(got.raw_data(), sent.raw_data(), bytes), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, TransportRoundTripTest,
    ::testing::Combine(::testing::Values("inproc://roundtrip", "tcp://127.0.0.1:0"),
                       ::testing::Values(size_t{1}, size_t{4}, size_t{1001}, size_t{65539},
                                         size_t{1} << 20, size_t{16} << 20, size_t{256} << 20)),
    [](const auto& info) {
      std::string name = std::get<0>(info.param).substr(0, std::get<0>(info.param).find(':'));
      return name + "_" + std::to_string(std::get<1>(info.param)) + "B";
    });

TEST(TransportZeroCopyTest, InprocDeliversTheSendersOwnBuffer) {
  ASSERT_OK_AND_ASSIGN(Pair p, MakePair("inproc://zerocopy"));
  Tensor sent = RandomBytes(1 << 20, 1);
  OutgoingMessage m(proto::MessageType::PUSH);
  m.AddTensor(sent, 0, 0);
  ASSERT_TRUE(p.client->Send(std::move(m), Soon()).ok());
  auto in = p.server->Receive(Soon());
  ASSERT_TRUE(in.ok());
  // Same address end to end: neither side copied the payload.
  EXPECT_EQ(in->tensors()[0].raw_data(), sent.raw_data());
  // ZeroMQ holds a reference to the storage, released when the receiver drops the message.
  EXPECT_GT(sent.storage().use_count(), 1);
  in = ProtocolError("dropped");
  EXPECT_EQ(sent.storage().use_count(), 1);
}

TEST(TransportZeroCopyTest, TcpPayloadIsAViewIntoTheZmqMessage) {
  ASSERT_OK_AND_ASSIGN(Pair p, MakePair("tcp://127.0.0.1:0"));
  OutgoingMessage m(proto::MessageType::PUSH);
  m.AddTensor(RandomBytes(1 << 20, 2), 0, 0);
  ASSERT_TRUE(p.client->Send(std::move(m), Soon()).ok());
  auto in = p.server->Receive(Soon());
  ASSERT_TRUE(in.ok());
  const zmq::message_t* frame = internal::PayloadFrameOf(*in, 0);
  ASSERT_NE(frame, nullptr);
  const auto* begin = static_cast<const char*>(frame->data());
  const auto* data = static_cast<const char*>(in->tensors()[0].raw_data());
  EXPECT_GE(data, begin);
  EXPECT_LE(data + in->tensors()[0].byte_size(), begin + frame->size());
  EXPECT_EQ(in->realigned_payloads(), 0u);
}

TEST(TransportDeadlineTest, ReceiveTimesOutNamingTheEndpoint) {
  ASSERT_OK_AND_ASSIGN(Pair p, MakePair("tcp://127.0.0.1:0"));
  const auto start = std::chrono::steady_clock::now();
  auto in = p.server->Receive(Deadline::After(milliseconds(200)));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), StatusCode::kTimeout);
  EXPECT_NE(in.status().message().find(p.server->endpoint()), std::string::npos);
  EXPECT_GE(elapsed, milliseconds(190));
  EXPECT_LT(elapsed, seconds(3));
}

TEST(TransportDeadlineTest, ClientOfAbsentServerTimesOut) {
  auto t = Transport::Create({});
  ASSERT_TRUE(t.ok());
  // Nothing listens on this port (we bind it, read it, and close it first).
  std::string endpoint;
  {
    auto s = (*t)->Listen("tcp://127.0.0.1:0");
    ASSERT_TRUE(s.ok());
    endpoint = (*s)->endpoint();
  }
  auto c = (*t)->Connect(endpoint, "lonely");
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Send(OutgoingMessage(proto::MessageType::PING), Soon()).ok());
  auto in = (*c)->Receive(Deadline::After(milliseconds(300)));
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), StatusCode::kTimeout);
  EXPECT_NE(in.status().message().find(endpoint), std::string::npos);
}

TEST(TransportBindTest, PortInUseIsNamed) {
  auto t = Transport::Create({});
  ASSERT_TRUE(t.ok());
  auto first = (*t)->Listen("tcp://127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  const std::string endpoint = (*first)->endpoint();
  auto second = (*t)->Listen(endpoint);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kNetwork);
  EXPECT_NE(second.status().message().find(endpoint), std::string::npos);
  EXPECT_NE(second.status().message().find("already in use"), std::string::npos);
}

TEST(TransportBindTest, BadEndpointsAndNamesAreRejected) {
  TransportOptions rdma;
  rdma.name = "rdma";
  const Status unknown = Transport::Create(rdma).status();
  EXPECT_EQ(unknown.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("unknown transport 'rdma'; available: zmq"), std::string::npos);
  auto t = Transport::Create({});
  ASSERT_TRUE(t.ok());
  auto bad = (*t)->Listen("http://127.0.0.1:80");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("http://127.0.0.1:80"), std::string::npos);
  EXPECT_FALSE((*t)->Listen("tcp://203.0.113.9:0").ok());  // not a local address
  EXPECT_FALSE((*t)->Connect("tcp://127.0.0.1:1", "").ok());
}

TEST(TransportRouterTest, ReplyToUnknownPeerIsAnError) {
  ASSERT_OK_AND_ASSIGN(Pair p, MakePair("inproc://unknown-peer"));
  OutgoingMessage m(proto::MessageType::PONG);
  m.set_peer("nobody");
  Status s = p.server->Send(std::move(m), Soon());
  EXPECT_EQ(s.code(), StatusCode::kNetwork);
  EXPECT_NE(s.message().find("nobody"), std::string::npos);
}

// A hostile peer speaking raw ZeroMQ at a real server socket.
class MalformedInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TransportOptions options;
    options.limits.max_payload_frames = 16;
    options.limits.max_frame_bytes = 1 << 20;
    ASSERT_OK_AND_ASSIGN(p_, MakePair("tcp://127.0.0.1:0", options));
    auto raw = internal::RawPeer::Connect(p_.server->endpoint(), "attacker");
    ASSERT_TRUE(raw.ok()) << raw.status();
    raw_ = std::move(raw).value();
  }

  void SendRaw(const std::vector<std::string>& frames) {
    Status s = raw_->Send(frames);
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  static std::string Header(const std::function<void(proto::Header::Builder)>& fill) {
    capnp::MallocMessageBuilder builder;
    fill(builder.initRoot<proto::Header>());
    auto words = capnp::messageToFlatArray(builder);
    return std::string(reinterpret_cast<const char*>(words.begin()), words.size() * 8);
  }

  // The server must reject the pending message, then still serve a valid one.
  void ExpectRejectedThenServing(const std::string& what) {
    auto bad = p_.server->Receive(Soon());
    ASSERT_FALSE(bad.ok()) << what << " was accepted";
    EXPECT_EQ(bad.status().code(), StatusCode::kProtocol) << what;
    EXPECT_NE(bad.status().message().find("attacker"), std::string::npos);

    OutgoingMessage ok(proto::MessageType::PING);
    ok.header().setRequestId(++valid_);
    ok.AddTensor(RandomBytes(64, valid_), 1, 0);
    ASSERT_TRUE(p_.client->Send(std::move(ok), Soon()).ok());
    auto good = p_.server->Receive(Soon());
    ASSERT_TRUE(good.ok()) << "after " << what << ": " << good.status().ToString();
    EXPECT_EQ(good->header().getRequestId(), valid_);
  }

  Pair p_;
  std::unique_ptr<internal::RawPeer> raw_;
  uint64_t valid_ = 0;
};

TEST_F(MalformedInputTest, EachKindIsRejectedAndTheServerKeepsServing) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {
    std::string garbage(8 * (1 + rng() % 32), '\0');
    for (char& c : garbage) c = static_cast<char>(rng());
    SendRaw({garbage, "payload?"});
    ExpectRejectedThenServing("random garbage " + std::to_string(i));
  }
  const std::string valid = Header([](proto::Header::Builder h) {
    h.setType(proto::MessageType::PUSH);
    h.setStatusMessage("a header long enough to truncate in several places");
  });
  SendRaw({valid.substr(0, valid.size() - 8)});
  ExpectRejectedThenServing("truncated header");
  SendRaw({valid.substr(0, 13)});
  ExpectRejectedThenServing("header cut mid-word");

  const std::string two_payloads = Header([](proto::Header::Builder h) {
    h.setType(proto::MessageType::PUSH);
    auto metas = h.initTensors(2);
    for (auto m : metas) {
      m.initShape(1).set(0, 2);
      m.setPayloadBytes(8);
    }
  });
  SendRaw({two_payloads, "12345678"});
  ExpectRejectedThenServing("frame count below header");
  SendRaw({two_payloads, "12345678", "12345678", "12345678"});
  ExpectRejectedThenServing("frame count above header");

  SendRaw({Header([](proto::Header::Builder h) {
             h.setType(proto::MessageType::PUSH);
             auto m = h.initTensors(1)[0];
             m.initShape(1).set(0, int64_t{1} << 38);
             m.setPayloadBytes(uint64_t{1} << 40);
           }),
           "12345678"});
  ExpectRejectedThenServing("declared size of 2^40 bytes");

  SendRaw(
      {Header([](proto::Header::Builder h) { h.setType(static_cast<proto::MessageType>(4242)); })});
  ExpectRejectedThenServing("unknown message type");

  std::vector<std::string> many(100, "x");
  many[0] = Header([](proto::Header::Builder h) { h.setType(proto::MessageType::PUSH); });
  SendRaw(many);
  ExpectRejectedThenServing("too many frames");

  SendRaw({""});
  ExpectRejectedThenServing("empty header frame");

  EXPECT_EQ(p_.server->stats().rejected, 28u);
}

TEST_F(MalformedInputTest, OversizedFrameIsRefusedByZeroMqAndOthersAreServed) {
  // 2 MiB against a 1 MiB limit: libzmq drops the connection instead of allocating the frame.
  SendRaw({Header([](proto::Header::Builder h) { h.setType(proto::MessageType::PUSH); }),
           std::string(2 << 20, 'z')});
  auto nothing = p_.server->Receive(Deadline::After(milliseconds(500)));
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.status().code(), StatusCode::kTimeout);
  OutgoingMessage ok(proto::MessageType::PING);
  ASSERT_TRUE(p_.client->Send(std::move(ok), Soon()).ok());
  EXPECT_TRUE(p_.server->Receive(Soon()).ok());
}

}  // namespace
}  // namespace towerps
