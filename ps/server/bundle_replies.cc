#include "ps/server/bundle_replies.h"

#include <set>

#include "common/logging.h"

namespace towerps::ps {

std::vector<IncomingMessage> BundleReplies::Open(IncomingMessage bundle) {
  const std::string peer = bundle.peer();
  Result<std::vector<IncomingMessage>> parts = SplitBundle(std::move(bundle));
  Status s = parts.status();
  std::vector<uint64_t> ids;
  for (size_t i = 0; s.ok() && i < parts->size(); ++i) {
    const IncomingMessage& part = (*parts)[i];
    if (part.type() != proto::MessageType::PUSH && part.type() != proto::MessageType::PULL) {
      s = ProtocolError("bundle part " + std::to_string(i) + " is a " +
                        MessageTypeName(part.type()) + "; a bundle holds pushes and pulls");
    }
    ids.push_back(part.header().getRequestId());
  }
  if (s.ok() && !Open(peer, ids)) s = ProtocolError("a bundle's request ids repeat");
  if (s.ok()) return std::move(parts).value();
  ++rejected_;
  TOWERPS_LOG(kError) << "rejected a bundle from " << PeerName(peer) << ": " << s.ToString();
  return {};
}

bool BundleReplies::Open(const std::string& peer, std::span<const uint64_t> request_ids) {
  std::set<uint64_t> seen;
  for (const uint64_t id : request_ids) {
    if (!seen.insert(id).second || parts_.count({peer, id}) != 0) return false;
  }
  const uint64_t key = next_++;
  Bundle& b = bundles_[key];
  b.peer = peer;
  b.replies.resize(request_ids.size());
  b.missing = request_ids.size();
  for (size_t i = 0; i < request_ids.size(); ++i) parts_[{peer, request_ids[i]}] = {key, i};
  return true;
}

std::optional<OutgoingMessage> BundleReplies::Add(OutgoingMessage reply) {
  if (parts_.empty()) return reply;
  const auto found = parts_.find({reply.peer(), reply.header().getRequestId()});
  if (found == parts_.end()) return reply;
  const auto [key, index] = found->second;
  parts_.erase(found);
  Bundle& b = bundles_.at(key);
  b.replies[index].emplace(std::move(reply));
  if (--b.missing > 0) return std::nullopt;
  std::vector<OutgoingMessage> replies;
  for (std::optional<OutgoingMessage>& r : b.replies) replies.push_back(std::move(*r));
  OutgoingMessage whole = OutgoingMessage::Bundle(std::move(replies));
  whole.set_peer(b.peer);
  bundles_.erase(key);
  return whole;
}

std::vector<OutgoingMessage> BundleReplies::Release(const std::string& peer) {
  for (auto it = parts_.begin(); it != parts_.end();) {
    it = it->first.first == peer ? parts_.erase(it) : std::next(it);
  }
  std::vector<OutgoingMessage> held;
  for (auto it = bundles_.begin(); it != bundles_.end();) {
    if (it->second.peer != peer) {
      ++it;
      continue;
    }
    for (std::optional<OutgoingMessage>& r : it->second.replies) {
      if (r) held.push_back(std::move(*r));
    }
    it = bundles_.erase(it);
  }
  return held;
}

}  // namespace towerps::ps
