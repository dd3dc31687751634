// Schema round-trips through the wire codec, and the validation DecodeMessage applies to every
// received message. Frames are cppzmq's, which the internal codec header brings.
#include "common/message.h"

#include <gtest/gtest.h>

#include <capnp/any.h>
#include <capnp/schema.h>

#include <cstring>
#include <optional>
#include <random>

#include "common/internal/wire_codec.h"

namespace towerps {
namespace {

using internal::DecodeMessage;

zmq::message_t CopyFrame(const void* data, size_t size) { return zmq::message_t(data, size); }

// Frames of `msg` as a receiver would get them (payloads copied: these are unit tests of decoding).
std::vector<zmq::message_t> Frames(OutgoingMessage& msg) {
  std::vector<zmq::message_t> frames;
  frames.push_back(internal::HeaderFrame(msg));
  for (const Tensor& t : msg.tensors()) frames.push_back(CopyFrame(t.raw_data(), t.byte_size()));
  return frames;
}

// A header built by hand, so tests can write values OutgoingMessage would never produce.
zmq::message_t RawHeader(const std::function<void(proto::Header::Builder)>& fill) {
  capnp::MallocMessageBuilder builder;
  fill(builder.initRoot<proto::Header>());
  auto words = capnp::messageToFlatArray(builder);
  return CopyFrame(words.begin(), words.size() * sizeof(capnp::word));
}

Tensor RandomTensor(Shape shape, uint32_t seed) {
  Tensor t = Tensor::Empty(std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = dist(rng);
  return t;
}

TEST(MessageTest, HeaderRoundTripsEveryField) {
  OutgoingMessage out(proto::MessageType::PUSH);
  auto h = out.header();
  h.setSenderRole(proto::Role::WORKER);
  h.setSenderRank(3);
  h.setJobId(0xfeedbeefcafe);
  h.setRequestId(77);
  h.setVersion(-5);
  SetStatus(h, TimeoutError("late"));
  h.setConfigFingerprint(123456789);
  h.setModelSignature(987654321);
  auto vars = h.initVariables(1);
  vars[0].setName("fc1/kernel");
  vars[0].initShape(2).set(1, 10);
  auto fields = h.initConfigFields(1);
  fields[0].setName("mode");
  fields[0].setValue("sync");
  Tensor a = RandomTensor({2, 3}, 1);
  Tensor b = RandomTensor({5}, 2);
  out.AddTensor(a, 4, 0);
  out.AddTensor(b, 9, 2);

  Result<IncomingMessage> in = DecodeMessage("peer", Frames(out), WireLimits{});
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  auto r = in->header();
  EXPECT_EQ(in->type(), proto::MessageType::PUSH);
  EXPECT_EQ(in->peer(), "peer");
  EXPECT_EQ(r.getSenderRole(), proto::Role::WORKER);
  EXPECT_EQ(r.getSenderRank(), 3u);
  EXPECT_EQ(r.getJobId(), 0xfeedbeefcafeu);
  EXPECT_EQ(r.getRequestId(), 77u);
  EXPECT_EQ(r.getVersion(), -5);
  EXPECT_EQ(StatusFromHeader(r), TimeoutError("late"));
  EXPECT_EQ(r.getConfigFingerprint(), 123456789u);
  EXPECT_EQ(r.getModelSignature(), 987654321u);
  EXPECT_STREQ(r.getVariables()[0].getName().cStr(), "fc1/kernel");
  EXPECT_EQ(r.getVariables()[0].getShape()[1], 10);
  EXPECT_STREQ(r.getConfigFields()[0].getValue().cStr(), "sync");
  ASSERT_EQ(in->tensors().size(), 2u);
  EXPECT_EQ(r.getTensors()[1].getVariableId(), 9u);
  EXPECT_EQ(r.getTensors()[1].getChunkId(), 2u);
  EXPECT_EQ(in->tensors()[0].shape(), (Shape{2, 3}));
  EXPECT_EQ(in->tensors()[1].shape(), (Shape{5}));
  EXPECT_EQ(std::memcmp(in->tensors()[0].raw_data(), a.raw_data(), a.byte_size()), 0);
  EXPECT_EQ(std::memcmp(in->tensors()[1].raw_data(), b.raw_data(), b.byte_size()), 0);
}

TEST(MessageTest, OkStatusRoundTrips) {
  OutgoingMessage out(proto::MessageType::PONG);
  auto in = DecodeMessage("", Frames(out), WireLimits{});
  ASSERT_TRUE(in.ok());
  EXPECT_TRUE(StatusFromHeader(in->header()).ok());
  EXPECT_TRUE(in->tensors().empty());
}

TEST(MessageTest, PayloadIsAViewOfTheFrame) {
  OutgoingMessage out(proto::MessageType::PULL_REPLY);
  out.AddTensor(RandomTensor({1024}, 3), 0, 0);
  std::vector<zmq::message_t> frames = Frames(out);
  const void* frame_data = frames[1].data();
  auto in = DecodeMessage("", std::move(frames), WireLimits{});
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(in->tensors()[0].raw_data(), frame_data);
  EXPECT_EQ(in->realigned_payloads(), 0u);
}

TEST(MessageTest, MisalignedPayloadIsCopiedAndCounted) {
  OutgoingMessage out(proto::MessageType::PUSH);
  Tensor t = RandomTensor({3}, 4);
  out.AddTensor(t, 0, 0);
  std::vector<zmq::message_t> frames;
  frames.push_back(internal::HeaderFrame(out));
  // A frame whose data starts one byte into a buffer: misaligned for float.
  static char storage[64];
  std::memcpy(storage + 1, t.raw_data(), 12);
  frames.emplace_back(
      storage + 1, 12, [](void*, void*) {}, nullptr);
  auto in = DecodeMessage("", std::move(frames), WireLimits{});
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->realigned_payloads(), 1u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(in->tensors()[0].raw_data()) % 4, 0u);
  EXPECT_EQ(std::memcmp(in->tensors()[0].raw_data(), t.raw_data(), 12), 0);
}

void ExpectRejected(std::vector<zmq::message_t> frames, const std::string& reason_part,
                    WireLimits limits = {}) {
  auto in = DecodeMessage("", std::move(frames), limits);
  ASSERT_FALSE(in.ok()) << "accepted a malformed message; expected: " << reason_part;
  EXPECT_EQ(in.status().code(), StatusCode::kProtocol);
  EXPECT_NE(in.status().message().find(reason_part), std::string::npos) << in.status().message();
}

TEST(MessageValidationTest, RejectsNoFrames) { ExpectRejected({}, "no frames"); }

TEST(MessageValidationTest, RejectsRandomGarbage) {
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    const size_t words = 1 + rng() % 64;
    std::vector<uint8_t> bytes(words * 8);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    std::vector<zmq::message_t> frames;
    frames.push_back(CopyFrame(bytes.data(), bytes.size()));
    auto in = DecodeMessage("", std::move(frames), WireLimits{});
    ASSERT_FALSE(in.ok()) << "garbage buffer " << i << " was accepted";
    EXPECT_EQ(in.status().code(), StatusCode::kProtocol);
  }
}

TEST(MessageValidationTest, RejectsHeaderNotMultipleOfEight) {
  std::vector<zmq::message_t> frames;
  frames.push_back(CopyFrame("abcdefghij", 10));
  ExpectRejected(std::move(frames), "not a Cap'n Proto message");
}

TEST(MessageValidationTest, RejectsOversizedHeader) {
  OutgoingMessage out(proto::MessageType::PING);
  out.header().setStatusMessage(std::string(4096, 'x'));
  WireLimits limits;
  limits.max_header_bytes = 1024;
  ExpectRejected(Frames(out), "not a Cap'n Proto message", limits);
}

TEST(MessageValidationTest, RejectsEveryTruncationOfAValidHeader) {
  OutgoingMessage out(proto::MessageType::PUSH);
  out.header().setStatusMessage("some text to make the header longer than a few words");
  auto vars = out.header().initVariables(2);
  vars[0].setName("a");
  vars[1].setName("b");
  zmq::message_t full = internal::HeaderFrame(out);
  for (size_t len = 8; len < full.size(); len += 8) {
    std::vector<zmq::message_t> frames;
    frames.push_back(CopyFrame(full.data(), len));
    auto in = DecodeMessage("", std::move(frames), WireLimits{});
    EXPECT_FALSE(in.ok()) << "truncated to " << len << " of " << full.size() << " bytes";
  }
}

TEST(MessageValidationTest, RejectsFrameCountThatDisagreesWithHeader) {
  Tensor t = RandomTensor({4}, 5);
  {
    OutgoingMessage out(proto::MessageType::PUSH);
    out.AddTensor(t, 0, 0);
    out.AddTensor(t, 0, 1);
    std::vector<zmq::message_t> frames = Frames(out);
    frames.pop_back();
    ExpectRejected(std::move(frames), "describes 2 framed payloads but the message carries 1");
  }
  {
    OutgoingMessage out(proto::MessageType::PUSH);
    std::vector<zmq::message_t> frames = Frames(out);
    frames.push_back(CopyFrame(t.raw_data(), t.byte_size()));
    ExpectRejected(std::move(frames), "describes 0 framed payloads but the message carries 1");
  }
}

TEST(MessageValidationTest, RejectsHugeDeclaredSizeWithoutAllocating) {
  const uint64_t huge = uint64_t{1} << 40;
  std::vector<zmq::message_t> frames;
  frames.push_back(RawHeader([&](proto::Header::Builder h) {
    h.setType(proto::MessageType::PUSH);
    auto meta = h.initTensors(1)[0];
    meta.initShape(1).set(0, static_cast<int64_t>(huge / 4));
    meta.setPayloadBytes(huge);
  }));
  frames.push_back(CopyFrame("12345678", 8));
  ExpectRejected(std::move(frames), "over the 1073741824-byte frame limit");
}

TEST(MessageValidationTest, RejectsShapeThatDisagreesWithBytes) {
  std::vector<zmq::message_t> frames;
  frames.push_back(RawHeader([&](proto::Header::Builder h) {
    h.setType(proto::MessageType::PUSH);
    auto meta = h.initTensors(1)[0];
    meta.initShape(1).set(0, 3);
    meta.setPayloadBytes(16);
  }));
  frames.push_back(CopyFrame("0123456789abcdef", 16));
  ExpectRejected(std::move(frames), "does not match its 16 declared bytes");
}

TEST(MessageValidationTest, RejectsDeclaredBytesThatDisagreeWithFrame) {
  std::vector<zmq::message_t> frames;
  frames.push_back(RawHeader([&](proto::Header::Builder h) {
    h.setType(proto::MessageType::PUSH);
    auto meta = h.initTensors(1)[0];
    meta.initShape(1).set(0, 4);
    meta.setPayloadBytes(16);
  }));
  frames.push_back(CopyFrame("01234567", 8));
  ExpectRejected(std::move(frames), "declares 16 bytes but its frame has 8");
}

TEST(MessageValidationTest, RejectsNegativeAndOverflowingShapes) {
  for (auto dims :
       {std::vector<int64_t>{-4}, std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40}}) {
    std::vector<zmq::message_t> frames;
    frames.push_back(RawHeader([&](proto::Header::Builder h) {
      h.setType(proto::MessageType::PUSH);
      auto meta = h.initTensors(1)[0];
      auto s = meta.initShape(static_cast<unsigned>(dims.size()));
      for (unsigned i = 0; i < dims.size(); ++i) s.set(i, dims[i]);
      meta.setPayloadBytes(16);
    }));
    frames.push_back(CopyFrame("0123456789abcdef", 16));
    ExpectRejected(std::move(frames), "payload 0");
  }
}

TEST(MessageValidationTest, RejectsUnknownTypeDtypeAndStatus) {
  {
    std::vector<zmq::message_t> frames;
    frames.push_back(RawHeader(
        [](proto::Header::Builder h) { h.setType(static_cast<proto::MessageType>(99)); }));
    ExpectRejected(std::move(frames), "unknown message type 99");
  }
  {
    std::vector<zmq::message_t> frames;
    frames.push_back(RawHeader([](proto::Header::Builder) {}));  // type 0: invalid
    ExpectRejected(std::move(frames), "unknown message type 0");
  }
  {
    std::vector<zmq::message_t> frames;
    frames.push_back(RawHeader([](proto::Header::Builder h) {
      h.setType(proto::MessageType::PUSH);
      auto meta = h.initTensors(1)[0];
      meta.setDtype(static_cast<proto::DType>(77));
      meta.setPayloadBytes(4);
    }));
    frames.push_back(CopyFrame("abcd", 4));
    ExpectRejected(std::move(frames), "unknown dtype 77");
  }
  {
    std::vector<zmq::message_t> frames;
    frames.push_back(RawHeader([](proto::Header::Builder h) {
      h.setType(proto::MessageType::PUSH_REPLY);
      h.setStatusCode(static_cast<proto::StatusCode>(500));
    }));
    ExpectRejected(std::move(frames), "unknown status code 500");
  }
}

TEST(MessageValidationTest, RejectsTooManyFrames) {
  OutgoingMessage out(proto::MessageType::PUSH);
  Tensor t = RandomTensor({1}, 6);
  for (int i = 0; i < 5; ++i) out.AddTensor(t, 0, i);
  WireLimits limits;
  limits.max_payload_frames = 4;
  ExpectRejected(Frames(out), "over the limit 4", limits);
}

TEST(MessageValidationTest, RejectsExcessiveRank) {
  OutgoingMessage out(proto::MessageType::PUSH);
  out.AddTensor(Tensor::Empty({1, 1, 1, 1, 1, 1, 1, 1, 1}), 0, 0);
  ExpectRejected(Frames(out), "rank 9");
}

TEST(MessageValidationTest, RejectsTextWithoutTerminator) {
  OutgoingMessage out(proto::MessageType::PING);
  out.header().setStatusMessage("abcdefg");  // 7 chars + NUL fill one word exactly
  zmq::message_t frame = internal::HeaderFrame(out);
  std::vector<uint8_t> bytes(static_cast<uint8_t*>(frame.data()),
                             static_cast<uint8_t*>(frame.data()) + frame.size());
  // Overwrite the NUL terminator of the text with a letter.
  bool patched = false;
  for (size_t i = 0; i + 7 < bytes.size(); ++i) {
    if (std::memcmp(&bytes[i], "abcdefg\0", 8) == 0) {
      bytes[i + 7] = 'h';
      patched = true;
    }
  }
  ASSERT_TRUE(patched);
  std::vector<zmq::message_t> frames;
  frames.push_back(CopyFrame(bytes.data(), bytes.size()));
  ExpectRejected(std::move(frames), "malformed Cap'n Proto header");
}

// Reads every field through the generated getters, as the server and the client do.
void ReadLikeAReceiver(proto::Header::Reader h) {
  for (auto t : h.getTensors()) {
    for (int64_t d : t.getShape()) (void)d;
    (void)t.getDtype();
  }
  (void)h.getStatusMessage();
  for (auto v : h.getVariables()) {
    (void)v.getName();
    for (int64_t d : v.getShape()) (void)d;
  }
  for (auto f : h.getConfigFields()) (void)(f.getName().size() + f.getValue().size());
  for (uint64_t b : h.getStats().getStalenessHistogram()) (void)b;
}

// The header of a one-tensor push whose pointer slot `slot` (of the struct `pick` chooses) is
// replaced by a list of bits: a pointer of the wrong kind for every pointer field we have.
zmq::message_t HeaderWithBitList(
    const std::function<capnp::AnyStruct::Builder(proto::Header::Builder)>& pick, unsigned slot) {
  return RawHeader([&](proto::Header::Builder h) {
    h.setType(proto::MessageType::PUSH);
    auto meta = h.initTensors(1)[0];
    meta.initShape(1).set(0, 1);
    meta.setPayloadBytes(4);
    h.initVariables(1)[0].setName("w");
    h.initConfigFields(1)[0].setName("lr");
    h.initStats().initStalenessHistogram(2);
    pick(h).getPointerSection()[slot].initAs<capnp::List<bool>>(3);
  });
}

TEST(MessageValidationTest, PointersOfTheWrongKindAreRejectedNotThrownLater) {
  // The fuzzing that crashed a server: "Found bit list where struct list was expected" thrown
  // by a getter after decoding had accepted the message. Every pointer field, top level and
  // nested, gets a bit list; the decoder must reject it, or accept a header whose every getter
  // is safe (Cap'n Proto lets some kinds stand in for others).
  using Pick = std::function<capnp::AnyStruct::Builder(proto::Header::Builder)>;
  struct Target {
    std::string name;
    unsigned pointers;
    Pick pick;
  };
  auto pointers = [](capnp::StructSchema s) { return s.getProto().getStruct().getPointerCount(); };
  const std::vector<Target> targets = {
      {"Header", pointers(capnp::Schema::from<proto::Header>()),
       [](proto::Header::Builder h) { return capnp::AnyStruct::Builder(kj::mv(h)); }},
      {"TensorMeta", pointers(capnp::Schema::from<proto::TensorMeta>()),
       [](proto::Header::Builder h) { return capnp::AnyStruct::Builder(h.getTensors()[0]); }},
      {"VariableSpec", pointers(capnp::Schema::from<proto::VariableSpec>()),
       [](proto::Header::Builder h) { return capnp::AnyStruct::Builder(h.getVariables()[0]); }},
      {"ConfigField", pointers(capnp::Schema::from<proto::ConfigField>()),
       [](proto::Header::Builder h) { return capnp::AnyStruct::Builder(h.getConfigFields()[0]); }},
      {"ServerStats", pointers(capnp::Schema::from<proto::ServerStats>()),
       [](proto::Header::Builder h) { return capnp::AnyStruct::Builder(h.getStats()); }},
  };
  int rejected = 0;
  for (const Target& t : targets) {
    for (unsigned slot = 0; slot < t.pointers; ++slot) {
      SCOPED_TRACE(t.name + " pointer " + std::to_string(slot));
      std::vector<zmq::message_t> frames;
      frames.push_back(HeaderWithBitList(t.pick, slot));
      float one = 1;
      frames.push_back(CopyFrame(&one, sizeof(one)));
      Result<IncomingMessage> in = DecodeMessage("fuzz", std::move(frames), WireLimits{});
      if (!in.ok()) {
        EXPECT_EQ(in.status().code(), StatusCode::kProtocol) << in.status().ToString();
        ++rejected;
        continue;
      }
      EXPECT_NO_THROW(ReadLikeAReceiver(in->header()));
    }
  }
  EXPECT_GE(rejected, 8);  // tensors, shapes, names, texts, stats, histogram: all can be wrong
}

// Found by tests/fuzz/message_fuzzer (tests/fuzz/corpus/message/regression-traversal-limit*):
// 40-word headers whose pointers lead to the same lists more than once. Validation (totalSize and
// ReadEveryField) spends most of the reader's traversal budget (4 words per header word), so the
// reads after it run out: the first header makes the decoder's own getTensors() throw "Exceeded
// message traversal limit" out of DecodeMessage (past every guard: the transport's Receive
// calls it unguarded); the second is accepted and then a receiver's getters throw.
TEST(MessageValidationTest, ReadsAfterValidationDoNotRunOutOfTraversalBudget) {
  static const uint64_t kThrowsInDecode[] = {
      0x0000002700000000ull, 0x0005000a00000000ull, 0x0000000000000003ull, 0x0000000000000000ull,
      0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x000000000000feedull,
      0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull,
      0x0000000700000069ull, 0x0000000000000000ull, 0x0000003700000009ull, 0x0000001d00000039ull,
      0x0000000100000000ull, 0x0000000500000000ull, 0x0000001100000000ull, 0x000000010000000dull,
      0x0000000000000002ull, 0x0000001000000000ull, 0x0000000500000000ull, 0x000001000000001dull,
      0x0000050000000000ull, 0x0000110000000000ull, 0x0000010000000d00ull, 0x0000000000000200ull,
      0x0000100000000000ull, 0x0000050000000000ull, 0x0000050000001d00ull, 0x0000020000000000ull,
      0x0000010000000000ull, 0x0000020000000000ull, 0x0000050000000000ull, 0x3700000009000e07ull,
      0x2700000039000000ull, 0x0000000000000000ull, 0x0100000008000000ull, 0x0000000000000200ull,
  };
  static const uint64_t kThrowsInGetters[] = {
      0x0000002700000000ull, 0x0005000a00000000ull, 0x0000000000000003ull, 0x0000000000000000ull,
      0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x000000000000feedull,
      0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull, 0x0000000000000000ull,
      0x0000000700000069ull, 0x0000000000000000ull, 0x0000003700000009ull, 0x0000000000000039ull,
      0x0000000000000100ull, 0x0000000000000200ull, 0x09000e0700000500ull, 0x3900000037000000ull,
      0x0000000027000000ull, 0x0800000000000000ull, 0x0000020001000000ull, 0x0200000100000000ull,
      0x0001000000000000ull, 0x0000110000000000ull, 0x0000010000000d00ull, 0x0000000000000200ull,
      0x0000000000100000ull, 0x001d000000050000ull, 0x0000000000050000ull, 0x0000000000020000ull,
      0x0000000000010000ull, 0x0000000000020000ull, 0x000e070000050000ull, 0x0000003700000009ull,
      0x0000000027000000ull, 0x0800000000000000ull, 0x0000020001000000ull, 0x0100000100000000ull,
  };
  for (const auto& [words, size] : {std::pair{kThrowsInDecode, sizeof(kThrowsInDecode)},
                                    std::pair{kThrowsInGetters, sizeof(kThrowsInGetters)}}) {
    SCOPED_TRACE(words == kThrowsInDecode ? "kThrowsInDecode" : "kThrowsInGetters");
    std::vector<zmq::message_t> frames;
    frames.push_back(CopyFrame(words, size));
    std::optional<Result<IncomingMessage>> in;
    EXPECT_NO_THROW(in.emplace(DecodeMessage("fuzz", std::move(frames), WireLimits{})));
    if (!in.has_value()) continue;
    if (!in->ok()) {
      EXPECT_EQ(in->status().code(), StatusCode::kProtocol) << in->status().ToString();
      continue;
    }
    EXPECT_NO_THROW(ReadLikeAReceiver((*in)->header()));
  }
}

}  // namespace
}  // namespace towerps
