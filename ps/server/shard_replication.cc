// The replication half of Shard (ps/server/shard.h): forwards, acknowledgements, promotion, and the
// backup's replay.
#include <algorithm>

#include "common/logging.h"
#include "job/replica_placement.h"
#include "ps/server/replica_state.h"
#include "ps/server/reply.h"
#include "ps/server/shard.h"

namespace towerps::ps {

void Shard::Forward(size_t index, proto::ReplicaOp op, const std::vector<Tensor>& tensors,
                    const IncomingMessage* request) {
  const ChunkSpec& spec = holders_[index]->spec();
  OutgoingMessage m = NewReplicateMessage(spec, op);
  auto h = m.header();
  if (op == proto::ReplicaOp::STATE) {
    AddHolderState(holders_[index]->Save(/*replica=*/true), &m);
  } else {
    auto r = request->header();
    h.setForWorker(static_cast<int32_t>(r.getSenderRank()));
    h.setVersion(r.getVersion());
    h.setClock(r.getClock());
    h.setReplacesPending(r.getReplacesPending());
    h.setFinite(r.getFinite());
    // Zero copy: the received values or gradient (not the ids a thenPull asks for) go on to
    // the backup as they are.
    for (const Tensor& t : tensors) m.AddTensor(t, spec.variable_id, spec.chunk_id);
  }
  Send(index, std::move(m));
}

void Shard::ForwardStep(size_t index, int64_t step, const std::vector<Tensor>& sums, int k) {
  const ChunkSpec& spec = holders_[index]->spec();
  OutgoingMessage m = NewReplicateMessage(spec, proto::ReplicaOp::STEP);
  auto h = m.header();
  h.setVersion(step);
  h.setStepGradients(k);
  // Zero copy: a holder never writes a step's sums after handing them out.
  if (k > 0) {
    for (const Tensor& t : sums) m.AddTensor(t, spec.variable_id, spec.chunk_id);
  }
  Send(index, std::move(m));
}

void Shard::Send(size_t index, OutgoingMessage forward) {
  ReplicaRole& role = roles_[index];
  if (role.outstanding++ == 0) role.ack_due = Deadline::After(kBackupAckTimeout);
  outbox_.Push(ps::Forward{role.peer, std::move(forward)});
  outbox_.Flush();  // at once: its acknowledgement is timed from now (kBackupAckTimeout)
}

void Shard::Acknowledged(size_t index, int64_t version) {
  ReplicaRole& role = roles_[index];
  if (!role.backup_live || role.outstanding == 0) return;  // from before the backup was dropped
  role.acked = std::max(role.acked, version);
  if (--role.outstanding > 0) role.ack_due = Deadline::After(kBackupAckTimeout);
  AnswerReadyPulls(index);
}

void Shard::Promote(size_t index, bool peer_joined) {
  ReplicaRole& role = roles_[index];
  if (role.kind == ReplicaRole::Kind::kJoining || role.kind == ReplicaRole::Kind::kOnly) return;
  // A take-over of a chunk this server is the primary of already changes nothing: a late one
  // (the peer may have rejoined since) must not drop the backup it now has. A dead backup is
  // dropped by the acknowledgement timeout instead.
  if (role.kind == ReplicaRole::Kind::kPrimary && !peer_joined) return;
  role.kind = ReplicaRole::Kind::kPrimary;
  role.backup_live = false;
  role.outstanding = 0;
  if (peer_joined) {
    // The restarted peer starts from everything this chunk holds now; the forwards after the
    // state follow it on the same link, in order.
    role.backup_live = true;
    role.acked = kNoVersion;
    dropped_backups_logged_.erase(role.peer);
    Forward(index, proto::ReplicaOp::STATE);
  }
  AnswerReadyPulls(index);
}

void Shard::DropSilentBackups() {
  for (size_t i = 0; i < roles_.size(); ++i) {
    ReplicaRole& role = roles_[i];
    if (!role.backup_live || role.outstanding == 0 || !role.ack_due.expired()) continue;
    if (dropped_backups_logged_.insert(role.peer).second) {
      TOWERPS_LOG(kWarning) << "the backup on server " << role.peer << " acknowledged nothing for "
                            << kBackupAckTimeout.count()
                            << " ms: serving its chunks without a replica until it rejoins";
      // Alive but behind (or refusing), it must not stay a failover target with stale values:
      // told it was replaced, it restarts and rejoins with this chunk's state (a dead one's
      // successor ignores this).
      OutgoingMessage replaced(proto::MessageType::TAKE_OVER);
      replaced.header().setSenderRole(proto::Role::SERVER);
      replaced.header().setFailedServer(role.peer);
      outbox_.Push(ps::Forward{role.peer, std::move(replaced)});
    }
    role.backup_live = false;
    role.outstanding = 0;
    AnswerReadyPulls(i);
  }
}

Deadline Shard::NextWake() const {
  Deadline wake = Deadline::After(std::chrono::seconds(1));
  for (const ReplicaRole& role : roles_) {
    if (role.backup_live && role.outstanding > 0) wake = wake.Earlier(role.ack_due);
  }
  return wake;
}

void Shard::HandleReplicate(size_t index, const IncomingMessage& msg) {
  ReplicaRole& role = roles_[index];
  const std::string where = Where(index);
  const proto::ReplicaOp op = msg.header().getReplicaOp();
  switch (role.kind) {
    case ReplicaRole::Kind::kOnly:
    case ReplicaRole::Kind::kPrimary:
      outbox_.Push(
          ErrorReply(msg, FailedPreconditionError(std::string(kDeposedMarker) + " " + where +
                                                  " since its primary was "
                                                  "reported dead")));
      return;
    case ReplicaRole::Kind::kJoining:
      // Forwards meant for this server's predecessor, queued before the state: superseded by it.
      if (op != proto::ReplicaOp::STATE) return;
      break;
    case ReplicaRole::Kind::kBackup:
      break;
  }
  if (Status s = Replay(index, msg); !s.ok()) {
    // The same code refused what the primary accepted: the replicas differ (a bug).
    outbox_.Push(ErrorReply(msg, s.WithContext("the backup cannot replay " + where)));
    return;
  }
  if (op == proto::ReplicaOp::STATE) role.kind = ReplicaRole::Kind::kBackup;
  const int64_t version = holders_[index]->version();
  versions_[index].store(version);
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::REPLICATE_REPLY);
  reply.header().setVersion(version);
  outbox_.Push(std::move(reply));
}

Status Shard::Replay(size_t index, const IncomingMessage& msg) {
  Holder& holder = *holders_[index];
  auto h = msg.header();
  switch (h.getReplicaOp()) {
    case proto::ReplicaOp::STATE: {
      TOWERPS_ASSIGN_OR_RETURN(HolderState state, ReadHolderState(msg, holder.spec(), config_));
      return holder.Load(state);
    }
    case proto::ReplicaOp::STEP: {
      const int k = h.getStepGradients();
      const size_t expected = k > 0 ? holder.step_tensors() : 0;
      if (msg.tensors().size() != expected) {
        return ProtocolError("a step's sums of " + std::to_string(k) + " gradients carry " +
                             std::to_string(msg.tensors().size()) + " tensors, expected " +
                             std::to_string(expected));
      }
      const std::vector<Tensor> sums(msg.tensors().begin(), msg.tensors().end());
      return holder.ApplyStep(h.getVersion(), sums, k, &replica_counters_);
    }
    case proto::ReplicaOp::INIT:
      return holder.Init(msg).status();
    case proto::ReplicaOp::PUSH: {
      TOWERPS_ASSIGN_OR_RETURN(Contribution c, holder.ReadPush(msg, h.getForWorker(), nullptr));
      c.sender_checked_finite = h.getFinite();
      // A push the primary refused (it forwards before applying) is refused here the same way
      // and changes nothing on either: acknowledged like the others.
      (void)holder.Push(std::move(c), &replica_counters_, h.getReplacesPending());
      return Status::Ok();
    }
    default:
      return ProtocolError("unknown replicate operation");
  }
}

}  // namespace towerps::ps
