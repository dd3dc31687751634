// Server's messages from and about its replica peers (ps/server/server.h): acknowledgements,
// joins and take-overs. The links themselves are ps/server/replica_links.h.
#include <optional>

#include "common/logging.h"
#include "job/replica_placement.h"
#include "job/variable_wire.h"
#include "ps/server/reply.h"
#include "ps/server/server.h"

namespace towerps::ps {

void Server::HandleLinkMessage(int peer, IncomingMessage msg) {
  auto h = msg.header();
  replicas_.Heard(peer, h.getServerIncarnation());
  switch (msg.type()) {
    case proto::MessageType::REPLICATE_REPLY: {
      ShardTask t;
      t.kind = ShardTask::Kind::kAck;
      t.version = h.getVersion();
      shards_.Post(h.getVariableId(), h.getChunkId(), std::move(t));
      return;
    }
    case proto::MessageType::JOIN_REPLY: {
      replicas_.JoinAnswered(peer);
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
  const std::vector<int> groups = shards_.PostToGroups(
      [&](int group) { return OtherReplica(options_.job, group, options_.rank) == peer; }, kind);
  for (int group : groups) replicas_.BecomePrimary(group);
  return groups.size();
}

void Server::HandleJoin(const IncomingMessage& msg) {
  const std::string& who = msg.peer();
  const int peer = replicas_.PeerRank(who);
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
  if (!replicas_.Links(failed)) {
    SendOrLog(ErrorReply(msg, InvalidArgumentError("server " + std::to_string(failed) +
                                                   " holds no replica of this server's chunks")));
    return;
  }
  const std::set<int> before = replicas_.primary_groups();
  const size_t n = PromoteGroupsSharedWith(failed, ShardTask::Kind::kPromote);
  if (replicas_.primary_groups() != before) {
    TOWERPS_LOG(kWarning) << PeerName(msg.peer()) << " found server " << failed
                          << " dead: this server is now the primary of its " << n << " chunks";
    // If it was only hung, it must not go on as a primary once it wakes: tell it. (A dead one's
    // successor sees another incarnation and ignores this.)
    const std::optional<uint64_t> incarnation = replicas_.IncarnationOf(failed);
    if (msg.header().getUnresponsive() && incarnation) {
      OutgoingMessage replaced(proto::MessageType::TAKE_OVER);
      replaced.header().setSenderRole(proto::Role::SERVER);
      replaced.header().setFailedServer(failed);
      replaced.header().setReplacedIncarnation(*incarnation);
      replicas_.Send(failed, std::move(replaced));
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
