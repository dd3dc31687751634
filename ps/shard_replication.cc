// The replication half of Shard (ps/shard.h): forwards, acknowledgements, promotion, and the
// backup's replay.
#include <algorithm>

#include "common/logging.h"
#include "ps/replica_set.h"
#include "ps/reply.h"
#include "ps/shard.h"

namespace towerps::ps {

namespace {

// A replicate message for the chunk or table partition of `spec`, carrying `op`.
OutgoingMessage NewForward(const ChunkSpec& spec, proto::ReplicaOp op) {
  OutgoingMessage m(proto::MessageType::REPLICATE);
  auto h = m.header();
  h.setSenderRole(proto::Role::SERVER);
  h.setVariableId(spec.variable_id);
  h.setChunkId(spec.chunk_id);
  h.setReplicaOp(op);
  return m;
}

}  // namespace

void Shard::Forward(size_t index, proto::ReplicaOp op, const IncomingMessage* request) {
  const ChunkSpec& spec = SpecOf(index);
  OutgoingMessage m = NewForward(spec, op);
  auto h = m.header();
  if (op == proto::ReplicaOp::STATE) {
    if (tables_[index]) {
      AddTableReplicaState(tables_[index]->Snapshot(/*replica=*/true), &m);
    } else {
      AddReplicaState(chunks_[index]->Snapshot(/*replica=*/true), &m);
    }
  } else {
    auto r = request->header();
    h.setForWorker(static_cast<int32_t>(r.getSenderRank()));
    h.setVersion(r.getVersion());
    h.setClock(r.getClock());
    h.setReplacesPending(r.getReplacesPending());
    // Zero copy: the received gradient (a table's: ids, rows and pulled counts, not the ids a
    // thenPull asks for) goes on to the backup as it is.
    const size_t tensors = tables_[index] ? 3 : 1;
    for (size_t t = 0; t < tensors; ++t) {
      m.AddTensor(request->tensors()[t], spec.variable_id, spec.chunk_id);
    }
  }
  Send(index, std::move(m));
}

void Shard::ForwardStep(size_t index, int64_t step, const Tensor& sum, int k) {
  const ChunkSpec& spec = SpecOf(index);
  OutgoingMessage m = NewForward(spec, proto::ReplicaOp::STEP);
  auto h = m.header();
  h.setVersion(step);
  h.setStepGradients(k);
  // Zero copy: the chunk never writes a step's sum after handing it out.
  if (k > 0) m.AddTensor(sum, spec.variable_id, spec.chunk_id);
  Send(index, std::move(m));
}

void Shard::ForwardTableStep(size_t index, int64_t step, const Tensor& ids, const Tensor& sums,
                             int k) {
  const ChunkSpec& spec = SpecOf(index);
  OutgoingMessage m = NewForward(spec, proto::ReplicaOp::STEP);
  auto h = m.header();
  h.setVersion(step);
  h.setStepGradients(k);
  // Zero copy: the partition never writes a step's sums after handing them out.
  if (k > 0) {
    m.AddTensor(ids, spec.variable_id, spec.chunk_id);
    m.AddTensor(sums, spec.variable_id, spec.chunk_id);
  }
  Send(index, std::move(m));
}

void Shard::Send(size_t index, OutgoingMessage forward) {
  ReplicaRole& role = roles_[index];
  if (role.outstanding++ == 0) role.ack_due = Deadline::After(kBackupAckTimeout);
  outbox_->Push(ps::Forward{role.peer, std::move(forward)});
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
    Forward(index, proto::ReplicaOp::STATE, nullptr);
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
      outbox_->Push(ps::Forward{role.peer, std::move(replaced)});
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
  auto h = msg.header();
  const ChunkSpec& spec = SpecOf(index);
  const std::string where = "variable " + std::to_string(spec.variable_id) +
                            (spec.is_table() ? " partition " : " chunk ") +
                            std::to_string(spec.chunk_id);
  const proto::ReplicaOp op = h.getReplicaOp();
  switch (role.kind) {
    case ReplicaRole::Kind::kOnly:
    case ReplicaRole::Kind::kPrimary:
      outbox_->Push(
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
  Status s = Status::Ok();
  if (tables_[index]) {
    HandleTableReplicate(index, msg, &s);
  } else {
    ReplayChunk(index, msg, &s);
  }
  if (s.ok() && op == proto::ReplicaOp::STATE) role.kind = ReplicaRole::Kind::kBackup;
  if (!s.ok()) {
    // The same code refused what the primary accepted: the replicas differ (a bug).
    outbox_->Push(ErrorReply(msg, s.WithContext("the backup cannot replay " + where)));
    return;
  }
  versions_[index].store(VersionOf(index));
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::REPLICATE_REPLY);
  reply.header().setVersion(VersionOf(index));
  outbox_->Push(std::move(reply));
}

void Shard::ReplayChunk(size_t index, const IncomingMessage& msg, Status* status) {
  Chunk& chunk = *chunks_[index];
  auto h = msg.header();
  const proto::ReplicaOp op = h.getReplicaOp();
  Status& s = *status;
  if (op == proto::ReplicaOp::STATE) {
    Result<ChunkState> state = ReadReplicaState(msg, chunk.spec(), config_);
    if (state.ok()) chunk.Restore(*state);
    s = state.status();
  } else if (op == proto::ReplicaOp::STEP) {
    const int k = h.getStepGradients();
    if (msg.tensors().size() != (k > 0 ? 1u : 0u)) {
      s = ProtocolError("a step's sum of " + std::to_string(k) + " gradients carries " +
                        std::to_string(msg.tensors().size()) + " tensors");
    } else {
      s = chunk.ApplyStep(h.getVersion(), k > 0 ? msg.tensors()[0] : Tensor(), k,
                          &replica_counters_);
    }
  } else if (msg.tensors().size() != 1) {
    s = ProtocolError("replicate carries " + std::to_string(msg.tensors().size()) +
                      " tensors, expected 1");
  } else if (op == proto::ReplicaOp::INIT) {
    s = chunk.Init(msg.tensors()[0]).status();
  } else if (op == proto::ReplicaOp::PUSH) {
    // A push the primary refused (it forwards before applying) is refused here the same way and
    // changes nothing on either: acknowledged like the others.
    (void)chunk.Push(h.getForWorker(), h.getVersion(), h.getClock(), msg.tensors()[0],
                     &replica_counters_, h.getReplacesPending());
  } else {
    s = ProtocolError("unknown replicate operation");
  }
}

}  // namespace towerps::ps
