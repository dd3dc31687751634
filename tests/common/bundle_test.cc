// Bundles (OutgoingMessage::Bundle, SplitBundle in common/message.h): parts come back with their
// own headers, payloads and the bundle's peer; a bundle in a bundle, payloads no part describes,
// a part whose payload is not the bundle's, and a bundle of no parts are refused (kProtocol).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/internal/wire_codec.h"
#include "common/message.h"

namespace towerps {
namespace {

Tensor RandomTensor(Shape shape, uint32_t seed) {
  Tensor t = Tensor::Empty(std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = u(rng);
  return t;
}

// A bundle as a receiver sees it: its frames decoded.
IncomingMessage Received(OutgoingMessage out) {
  std::vector<zmq::message_t> frames;
  frames.push_back(internal::HeaderFrame(out));
  for (const Tensor& t : out.tensors()) frames.push_back(internal::PayloadFrame(t));
  Result<IncomingMessage> in = internal::DecodeMessage("worker:1", std::move(frames), WireLimits{});
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  return std::move(in).value();
}

TEST(BundleTest, PartsComeBackWithTheirHeadersPayloadsAndPeer) {
  std::vector<OutgoingMessage> parts;
  parts.emplace_back(proto::MessageType::PULL);
  parts.back().header().setRequestId(11);
  parts.back().header().setVariableId(3);
  parts.emplace_back(proto::MessageType::PUSH);
  parts.back().header().setRequestId(12);
  parts.back().header().setVersion(5);
  const Tensor a = RandomTensor({4}, 1), b = RandomTensor({2, 3}, 2);
  parts.back().AddTensor(a, 4, 0);
  parts.back().AddTensor(b, 4, 1);
  parts[0].header().setSenderRank(1);
  OutgoingMessage bundle = OutgoingMessage::Bundle(std::move(parts));
  EXPECT_EQ(bundle.header().getSenderRank(), 1u);
  ASSERT_EQ(bundle.tensors().size(), 2u);
  Result<std::vector<IncomingMessage>> split = SplitBundle(Received(std::move(bundle)));
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  ASSERT_EQ(split->size(), 2u);
  const IncomingMessage& pull = (*split)[0];
  const IncomingMessage& push = (*split)[1];
  EXPECT_EQ(pull.type(), proto::MessageType::PULL);
  EXPECT_EQ(pull.header().getRequestId(), 11u);
  EXPECT_EQ(pull.header().getVariableId(), 3u);
  EXPECT_TRUE(pull.tensors().empty());
  EXPECT_EQ(push.header().getRequestId(), 12u);
  EXPECT_EQ(push.header().getVersion(), 5);
  ASSERT_EQ(push.tensors().size(), 2u);
  EXPECT_EQ(push.header().getTensors()[1].getChunkId(), 1u);
  EXPECT_EQ(std::memcmp(push.tensors()[0].raw_data(), a.raw_data(), a.byte_size()), 0);
  EXPECT_EQ(std::memcmp(push.tensors()[1].raw_data(), b.raw_data(), b.byte_size()), 0);
  EXPECT_EQ(push.peer(), "worker:1");
}

TEST(BundleTest, ABundleThatIsNotPartsOfItsPayloadsIsRefused) {
  auto expect_refused = [](OutgoingMessage bundle, const std::string& why) {
    Result<std::vector<IncomingMessage>> split = SplitBundle(Received(std::move(bundle)));
    ASSERT_FALSE(split.ok()) << "accepted; expected: " << why;
    EXPECT_EQ(split.status().code(), StatusCode::kProtocol);
    EXPECT_NE(split.status().message().find(why), std::string::npos) << split.status().message();
  };
  {  // a bundle inside a bundle
    std::vector<OutgoingMessage> inner;
    inner.emplace_back(proto::MessageType::PULL);
    std::vector<OutgoingMessage> outer;
    outer.push_back(OutgoingMessage::Bundle(std::move(inner)));
    expect_refused(OutgoingMessage::Bundle(std::move(outer)), "part 0 is a bundle itself");
  }
  {  // payloads no part describes
    std::vector<OutgoingMessage> parts;
    parts.emplace_back(proto::MessageType::PULL);
    OutgoingMessage bundle = OutgoingMessage::Bundle(std::move(parts));
    bundle.AddTensor(RandomTensor({2}, 3), 0, 0);
    expect_refused(std::move(bundle), "describe 0 of its 1 payloads");
  }
  {  // a part whose payload is not the bundle's
    std::vector<OutgoingMessage> parts;
    parts.emplace_back(proto::MessageType::PUSH);
    parts.back().AddTensor(RandomTensor({2}, 3), 0, 0);
    OutgoingMessage bundle = OutgoingMessage::Bundle(std::move(parts));
    OutgoingMessage other(proto::MessageType::BUNDLE);
    other.header().setParts(bundle.header().asReader().getParts());
    other.AddTensor(RandomTensor({3}, 3), 0, 0);  // 3 floats where the part says 2
    expect_refused(std::move(other), "part 0's payload 0 is not the bundle's payload 0");
  }
  {  // no parts
    expect_refused(OutgoingMessage(proto::MessageType::BUNDLE), "a bundle of 0 parts");
  }
}

}  // namespace
}  // namespace towerps
