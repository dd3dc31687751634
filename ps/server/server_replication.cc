// The replication half of Server (ps/server/server.h): links to peers, join, take-over, and the
// acknowledgements that come back on the links.
#include <algorithm>
#include <cstring>
#include <string_view>

#include "common/logging.h"
#include "job/replica_placement.h"
#include "job/variable_wire.h"
#include "ps/server/replica_state.h"
#include "ps/server/reply.h"
#include "ps/server/server.h"

namespace towerps::ps {

ReplicaRole Server::RoleFor(int group) const {
  ReplicaRole role;
  if (options_.job.ps_replicas < 2) return role;
  role.peer = OtherReplica(options_.job, group, options_.rank);
  if (options_.rejoin) {
    role.kind = ReplicaRole::Kind::kJoining;
  } else if (group == options_.rank) {
    role.kind = ReplicaRole::Kind::kPrimary;
    role.backup_live = true;
  } else {
    role.kind = ReplicaRole::Kind::kBackup;
  }
  return role;
}

Status Server::ConnectPeers() {
  const JobConfig& job = options_.job;
  if (job.ps_replicas < 2) {
    primary_groups_.insert(options_.rank);
    return Status::Ok();
  }
  for (int g : GroupsHeldBy(job, options_.rank)) {
    if (g == options_.rank && !options_.rejoin) primary_groups_.insert(g);
    const int peer = OtherReplica(job, g, options_.rank);
    if (links_.count(peer) != 0) continue;
    TOWERPS_ASSIGN_OR_RETURN(links_[peer],
                             transport_->Connect(options_.peers[static_cast<size_t>(peer)],
                                                 "server:" + std::to_string(options_.rank)));
  }
  return Status::Ok();
}

void Server::SendToPeer(int peer, OutgoingMessage msg) {
  auto it = links_.find(peer);
  if (it == links_.end()) return;
  if (msg.header().getType() == proto::MessageType::TAKE_OVER &&
      msg.header().getReplacedIncarnation() == 0) {
    // A shard's notice to a backup it dropped: addressed to the process it last heard from.
    auto known = peer_incarnations_.find(peer);
    if (known == peer_incarnations_.end()) return;
    msg.header().setReplacedIncarnation(known->second);
  }
  msg.header().setSenderRank(static_cast<uint32_t>(options_.rank));
  msg.header().setServerIncarnation(incarnation_);
  // A dead peer's messages queue in the link (and reach its successor, which ignores what
  // precedes its state); the send itself does not wait.
  Status s = it->second->Send(std::move(msg), Deadline::After(std::chrono::seconds(1)));
  if (!s.ok()) TOWERPS_LOG(kWarning) << "to server " << peer << ": " << s.ToString();
}

void Server::SendJoins() {
  if (!options_.rejoin) return;
  for (const auto& [peer, link] : links_) {
    OutgoingMessage m(proto::MessageType::JOIN);
    m.header().setSenderRole(proto::Role::SERVER);
    SendToPeer(peer, std::move(m));
    joins_pending_.insert(peer);
  }
  joins_due_ = Deadline::After(options_.join_timeout);
  TOWERPS_LOG(kInfo) << "restarted: taking the state of its chunks from " << joins_pending_.size()
                     << " peer(s)";
}

Status Server::CheckJoins() {
  if (joins_pending_.empty() || !joins_due_.expired()) return Status::Ok();
  return TimeoutError("server " + std::to_string(*joins_pending_.begin()) +
                      " did not answer this restarted server's join within " +
                      std::to_string(options_.join_timeout.count()) +
                      " ms; without a live replica its chunks cannot be recovered");
}

int Server::PeerRank(const std::string& routing_id) const {
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

void Server::HandleLinkMessage(int peer, IncomingMessage msg) {
  auto h = msg.header();
  if (h.getServerIncarnation() != 0) peer_incarnations_[peer] = h.getServerIncarnation();
  switch (msg.type()) {
    case proto::MessageType::REPLICATE_REPLY: {
      auto it = homes_.find({h.getVariableId(), h.getChunkId()});
      if (it == homes_.end()) return;
      ShardTask t;
      t.kind = ShardTask::Kind::kAck;
      t.chunk = it->second.index;
      t.version = h.getVersion();
      shards_[it->second.shard]->Post(std::move(t));
      return;
    }
    case proto::MessageType::JOIN_REPLY: {
      joins_pending_.erase(peer);
      const std::vector<VariableSpec> vars = ReadVariables(h);
      if (!placement_) {
        Status s = EstablishModel(vars, h.getModelSignature());
        if (!s.ok()) {
          TOWERPS_LOG(kError) << "server " << peer << "'s model: " << s.ToString();
          return;
        }
        StartShards();
      }
      TOWERPS_LOG(kInfo) << "server " << peer << " sends the state of the chunks it shares";
      return;
    }
    case proto::MessageType::ERROR: {
      const std::string why = h.getStatusMessage().cStr();
      if (why.find(kDeposedMarker) != std::string::npos) {
        TOWERPS_LOG(kError) << "server " << peer << " took over: " << why;
        deposed_ = true;
        return;
      }
      TOWERPS_LOG(kError) << "server " << peer << " refused a replication message: " << why;
      return;
    }
    default:
      return;
  }
}

void Server::HandleReplicate(IncomingMessage msg) {
  if (msg.peer().rfind("server:", 0) != 0) {
    SendOrLog(ErrorReply(msg, FailedPreconditionError("only servers replicate chunks")));
    return;
  }
  if (!placement_) {
    // A restarted server's peer may send states before its joinReply gives the model.
    if (early_replicates_.size() < 65536) early_replicates_.push_back(std::move(msg));
    return;
  }
  Route(std::move(msg));
}

size_t Server::PromoteGroupsSharedWith(int peer, ShardTask::Kind kind) {
  size_t chunks = 0;
  for (const auto& [key, group] : groups_) {
    if (OtherReplica(options_.job, group, options_.rank) != peer) continue;
    primary_groups_.insert(group);
    const ChunkHome& home = homes_.at(key);
    ShardTask t;
    t.kind = kind;
    t.chunk = home.index;
    shards_[home.shard]->Post(std::move(t));
    ++chunks;
  }
  return chunks;
}

void Server::HandleJoin(const IncomingMessage& msg) {
  const std::string& who = msg.peer();
  const int peer = PeerRank(who);
  if (peer < 0) {
    SendOrLog(ErrorReply(
        msg, FailedPreconditionError(PeerName(who) + " shares no chunks with this server")));
    return;
  }
  if (!placement_) {
    SendOrLog(ErrorReply(msg, FailedPreconditionError("this server holds no model yet")));
    return;
  }
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::JOIN_REPLY);
  reply.header().setModelSignature(model_signature_);
  WriteVariables(variables_, reply.header());
  SendOrLog(std::move(reply));
  const size_t n = PromoteGroupsSharedWith(peer, ShardTask::Kind::kPeerJoined);
  TOWERPS_LOG(kInfo) << "server " << peer << " restarted: it becomes the backup of " << n
                     << " chunks again (their state follows)";
}

void Server::HandleTakeOver(const IncomingMessage& msg) {
  const int failed = msg.header().getFailedServer();
  if (links_.count(failed) == 0) {
    SendOrLog(ErrorReply(msg, InvalidArgumentError("server " + std::to_string(failed) +
                                                   " holds no replica of this server's chunks")));
    return;
  }
  std::set<int> before = primary_groups_;
  const size_t n = PromoteGroupsSharedWith(failed, ShardTask::Kind::kPromote);
  if (primary_groups_ != before) {
    TOWERPS_LOG(kWarning) << PeerName(msg.peer()) << " found server " << failed
                          << " dead: this server is now the primary of its " << n << " chunks";
    // If it was only hung, it must not go on as a primary once it wakes: tell it. (A dead one's
    // successor sees another incarnation and ignores this.)
    auto it = peer_incarnations_.find(failed);
    if (msg.header().getUnresponsive() && it != peer_incarnations_.end()) {
      OutgoingMessage replaced(proto::MessageType::TAKE_OVER);
      replaced.header().setSenderRole(proto::Role::SERVER);
      replaced.header().setFailedServer(failed);
      replaced.header().setReplacedIncarnation(it->second);
      SendToPeer(failed, std::move(replaced));
    }
  }
  SendOrLog(ReplyTo(msg, proto::MessageType::TAKE_OVER_REPLY));
}

void Server::HandleReplaced(const IncomingMessage& msg) {
  if (msg.header().getReplacedIncarnation() != incarnation_) return;  // meant for a predecessor
  TOWERPS_LOG(kError) << PeerName(msg.peer())
                      << " replaced this server's copy of the chunks they share (it was found "
                         "unresponsive): stopping, to restart and rejoin";
  deposed_ = true;
}

}  // namespace towerps::ps
