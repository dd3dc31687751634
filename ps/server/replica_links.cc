#include "ps/server/replica_links.h"

#include <string_view>

#include "common/logging.h"
#include "job/replica_placement.h"

namespace towerps::ps {

ReplicaLinks::ReplicaLinks(const JobConfig& job, int rank, bool rejoin, uint64_t incarnation)
    : job_(job), rank_(rank), rejoin_(rejoin), incarnation_(incarnation) {}

ReplicaRole ReplicaLinks::RoleFor(int group) const {
  ReplicaRole role;
  if (job_.ps_replicas < 2) return role;
  role.peer = OtherReplica(job_, group, rank_);
  if (rejoin_) {
    role.kind = ReplicaRole::Kind::kJoining;
  } else if (group == rank_) {
    role.kind = ReplicaRole::Kind::kPrimary;
    role.backup_live = true;
  } else {
    role.kind = ReplicaRole::Kind::kBackup;
  }
  return role;
}

Status ReplicaLinks::Connect(Transport& transport, const std::vector<std::string>& endpoints) {
  if (job_.ps_replicas < 2) {
    primary_groups_.insert(rank_);
    return Status::Ok();
  }
  for (int g : GroupsHeldBy(job_, rank_)) {
    if (g == rank_ && !rejoin_) primary_groups_.insert(g);
    const int peer = OtherReplica(job_, g, rank_);
    if (links_.count(peer) != 0) continue;
    TOWERPS_ASSIGN_OR_RETURN(links_[peer], transport.Connect(endpoints[static_cast<size_t>(peer)],
                                                             "server:" + std::to_string(rank_)));
  }
  return Status::Ok();
}

void ReplicaLinks::AppendSockets(std::vector<Socket*>* sockets, std::vector<int>* ranks) const {
  for (const auto& [rank, link] : links_) {
    sockets->push_back(link.get());
    ranks->push_back(rank);
  }
}

int ReplicaLinks::PeerRank(const std::string& routing_id) const {
  // Called for every message: workers' ids are turned away by the prefix, without allocating.
  constexpr std::string_view kPrefix = "server:";
  if (links_.empty() || routing_id.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  for (const auto& [rank, link] : links_) {
    if (routing_id.compare(kPrefix.size(), std::string::npos, std::to_string(rank)) == 0) {
      return rank;
    }
  }
  return -1;
}

void ReplicaLinks::Send(int peer, OutgoingMessage msg) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  if (msg.header().getType() == proto::MessageType::TAKE_OVER &&
      msg.header().getReplacedIncarnation() == 0) {
    // A shard's notice to a backup it dropped: addressed to the process it last heard from.
    auto known = peer_incarnations_.find(peer);
    if (known == peer_incarnations_.end()) return;
    msg.header().setReplacedIncarnation(known->second);
  }
  msg.header().setSenderRank(static_cast<uint32_t>(rank_));
  msg.header().setServerIncarnation(incarnation_);
  Status s = it->second->Send(std::move(msg), Deadline::After(std::chrono::seconds(1)));
  if (!s.ok()) TOWERPS_LOG(kWarning) << "to server " << peer << ": " << s.ToString();
}

void ReplicaLinks::Heard(int peer, uint64_t incarnation) {
  if (incarnation != 0) peer_incarnations_[peer] = incarnation;
}

std::optional<uint64_t> ReplicaLinks::IncarnationOf(int peer) const {
  auto it = peer_incarnations_.find(peer);
  if (it == peer_incarnations_.end()) return std::nullopt;
  return it->second;
}

void ReplicaLinks::SendJoins(std::chrono::milliseconds timeout) {
  if (!rejoin_) return;
  for (const auto& [peer, link] : links_) {
    OutgoingMessage m(proto::MessageType::JOIN);
    m.header().setSenderRole(proto::Role::SERVER);
    Send(peer, std::move(m));
    joins_pending_.insert(peer);
  }
  join_timeout_ = timeout;
  joins_due_ = Deadline::After(timeout);
  TOWERPS_LOG(kInfo) << "restarted: taking the state of its chunks from " << joins_pending_.size()
                     << " peer(s)";
}

Status ReplicaLinks::CheckJoins() const {
  if (joins_pending_.empty() || !joins_due_.expired()) return Status::Ok();
  return TimeoutError("server " + std::to_string(*joins_pending_.begin()) +
                      " did not answer this restarted server's join within " +
                      std::to_string(join_timeout_.count()) +
                      " ms; without a live replica its chunks cannot be recovered");
}

}  // namespace towerps::ps
