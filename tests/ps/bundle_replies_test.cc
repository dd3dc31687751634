// BundleReplies (ps/server/bundle_replies.h): a bundle's parts come out to be handled alone,
// their replies are held until the last one and then leave as one bundle in the parts' order;
// other replies pass; a bundle of anything but pushes and pulls, or with a repeated request id,
// is refused and counted; a peer that registers again gets what was held, each reply alone.
#include "ps/server/bundle_replies.h"

#include <gtest/gtest.h>

#include "tests/ps/received.h"

namespace towerps::ps {
namespace {

// A bundle from "worker:0" of parts of `types`, request ids 10, 11, ...
IncomingMessage Bundle(std::vector<proto::MessageType> types, uint64_t first_id = 10) {
  std::vector<OutgoingMessage> parts;
  for (size_t i = 0; i < types.size(); ++i) {
    parts.emplace_back(types[i]);
    parts.back().header().setRequestId(first_id + i);
  }
  OutgoingMessage bundle = OutgoingMessage::Bundle(std::move(parts));
  Result<IncomingMessage> in = Received(bundle, "worker:0");
  EXPECT_TRUE(in.ok()) << in.status().ToString();
  return std::move(in).value();
}

OutgoingMessage Reply(uint64_t request_id, const std::string& peer = "worker:0") {
  OutgoingMessage r(proto::MessageType::PULL_REPLY);
  r.header().setRequestId(request_id);
  r.set_peer(peer);
  return r;
}

TEST(BundleRepliesTest, TheRepliesOfABundleLeaveTogetherInItsOrder) {
  BundleReplies replies;
  std::vector<IncomingMessage> parts =
      replies.Open(Bundle({proto::MessageType::PULL, proto::MessageType::PUSH}));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].header().getRequestId(), 11u);
  EXPECT_EQ(replies.open(), 1u);
  EXPECT_FALSE(replies.Add(Reply(11)).has_value());  // held: part 0 has no reply yet
  std::optional<OutgoingMessage> other = replies.Add(Reply(99));
  ASSERT_TRUE(other.has_value());  // no bundle's: as it is
  EXPECT_EQ(other->header().getType(), proto::MessageType::PULL_REPLY);
  std::optional<OutgoingMessage> whole = replies.Add(Reply(10));
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->peer(), "worker:0");
  Result<IncomingMessage> in = Received(*whole, "server");
  ASSERT_TRUE(in.ok());
  Result<std::vector<IncomingMessage>> back = SplitBundle(std::move(*in));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].header().getRequestId(), 10u);
  EXPECT_EQ((*back)[1].header().getRequestId(), 11u);
  EXPECT_EQ(replies.open(), 0u);
}

TEST(BundleRepliesTest, ABundleOfOtherRequestsOrRepeatedIdsIsRefusedAndCounted) {
  BundleReplies replies;
  EXPECT_TRUE(
      replies.Open(Bundle({proto::MessageType::PULL, proto::MessageType::REGISTER})).empty());
  EXPECT_TRUE(
      replies.Open(Bundle({proto::MessageType::PULL, proto::MessageType::PULL}, 5)).size() == 2);
  // Request id 6 is still open for this peer.
  EXPECT_TRUE(
      replies.Open(Bundle({proto::MessageType::PULL, proto::MessageType::PULL}, 6)).empty());
  EXPECT_EQ(replies.rejected(), 2u);
  EXPECT_EQ(replies.open(), 1u);
}

TEST(BundleRepliesTest, APeerThatRegistersAgainGetsWhatWasHeldEachReplyAlone) {
  BundleReplies replies;
  ASSERT_EQ(replies.Open(Bundle({proto::MessageType::PULL, proto::MessageType::PULL})).size(), 2u);
  EXPECT_FALSE(replies.Add(Reply(10)).has_value());
  std::vector<OutgoingMessage> held = replies.Release("worker:0");
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0].header().getRequestId(), 10u);
  EXPECT_TRUE(replies.Add(Reply(11)).has_value());  // no longer held: it goes alone
  EXPECT_EQ(replies.open(), 0u);
}

}  // namespace
}  // namespace towerps::ps
