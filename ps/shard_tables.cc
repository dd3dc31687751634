// The table half of Shard (ps/shard.h): pulls and pushes of a table partition's rows by id
// (ps/table_chunk.h).
//
// Messages (variableId, chunkId name the partition; common/proto/towerps.capnp):
//   pull       tensors: ids (uint64 [n]); version, clock and exactVersion as a chunk's pull.
//              With everyRow: every row the partition holds (the ids are ignored)
//   pullReply  tensors: rows (float32 [n, dim], in the pull's order), and each row's update
//              count (uint32 [n]); version: the partition's version the rows are at. For
//              everyRow, a third: the rows' ids (uint64 [n], increasing)
//   push       tensors: ids (uint64 [n], unique and increasing), gradient rows (float32 [n, dim])
//              and each row's update count from the pull the gradient was computed from
//              (uint32 [n]); version and clock as a chunk's push. With thenPull, a fourth: the
//              ids of the rows to pull next (uint64 [m]), at pullVersion and pullClock
//   pushReply  version and staleness as a chunk's; for a push with thenPull, a pullReply
//              instead, sent when the rows are ready, with the push's staleness (and
//              pushRefusal) as a chunk's thenPull reply
// A request that does not fit (tensor count, dtypes, shapes, ids outside the bound or the
// partition, unsorted pushed ids) gets an error naming the table and changes nothing.
#include "common/logging.h"
#include "ps/replica_set.h"
#include "ps/reply.h"
#include "ps/shard.h"
#include "ps/table_requests.h"

namespace towerps::ps {

void Shard::HandleTable(size_t index, IncomingMessage msg) {
  const TableChunk& table = *tables_[index];
  switch (msg.type()) {
    case proto::MessageType::PULL: {
      Result<Tensor> ids = ReadPullIds(msg, table);
      if (!ids.ok()) {
        outbox_->Push(ErrorReply(msg, ids.status()));
      } else {
        AnswerOrWait(index, Waiter{.request = std::move(msg), .pull_ids = std::move(ids).value()});
      }
      return;
    }
    case proto::MessageType::PUSH:
      HandleTablePush(index, std::move(msg), roles_[index].backup_live);
      versions_[index].store(table.version());
      AnswerReadyPulls(index);
      return;
    case proto::MessageType::INIT:
      outbox_->Push(ErrorReply(
          msg, InvalidArgumentError("table variable " + std::to_string(table.spec().variable_id) +
                                    " takes no initial value: its rows are drawn when first "
                                    "updated")));
      return;
    default:
      outbox_->Push(ErrorReply(
          msg, InvalidArgumentError("a table cannot serve " + MessageTypeName(msg.type()))));
  }
}

void Shard::HandleTablePush(size_t index, IncomingMessage msg, bool forward) {
  TableChunk& table = *tables_[index];
  auto h = msg.header();
  Result<RowPush> push = ReadRowPush(msg, table);
  if (!push.ok()) {
    outbox_->Push(ErrorReply(msg, push.status()));
    return;
  }
  // Async/SSP: forwarded first, as a chunk's push is (Shard::HandlePush); sync forwards each
  // step's sums instead (the step hook, AddTable).
  if (forward && config_.mode != UpdateMode::kSync) {
    Forward(index, proto::ReplicaOp::PUSH, &msg);
  }
  Contribution c = std::move(push->contribution);
  Result<PushOutcome> out = table.Push(std::move(c), &counters_, h.getReplacesPending());
  if (!out.ok()) {
    outbox_->Push(ErrorReply(msg, out.status()));
    return;
  }
  const bool dropped =
      out->kind == PushOutcome::Kind::kDropped || out->kind == PushOutcome::Kind::kDuplicate;
  const bool refused = out->kind == PushOutcome::Kind::kRejected;
  if (h.getThenPull()) {
    // Answered with the rows, as a chunk's thenPull is: a refused gradient too.
    if (refused) NoteRefusal(msg, out->rejection);
    Tensor next = std::move(push->next_ids);
    msg.DropPayloads();  // the partition took what it keeps; the pull needs only its ids
    AnswerOrWait(index, Waiter{.request = std::move(msg),
                               .push_staleness = dropped ? -1 : out->staleness,
                               .push_refusal = refused ? out->rejection : std::string(),
                               .pull_ids = std::move(next)});
    return;
  }
  if (refused) {
    RefuseNonFinite(msg, out->rejection);
    return;
  }
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::PUSH_REPLY);
  reply.header().setVersion(out->version);
  reply.header().setStaleness(dropped ? -1 : out->staleness);
  outbox_->Push(std::move(reply));
}

void Shard::AnswerOrWait(size_t index, Waiter waiter) {
  if (RowsReady(index, waiter.request)) {
    ReplyRows(index, waiter);
  } else {
    Wait(waiters_[index], std::move(waiter));
  }
}

bool Shard::RowsReady(size_t index, const IncomingMessage& request) const {
  const PullAsk ask = AskOf(request);
  if (!tables_[index]->PullReady(ask.version, ask.clock)) return false;
  // A primary shows a worker only what its backup holds too.
  const ReplicaRole& role = roles_[index];
  return !role.backup_live || role.acked >= ask.version;
}

void Shard::ReplyRows(size_t index, const Waiter& waiter) {
  const IncomingMessage& request = waiter.request;
  const TableChunk& table = *tables_[index];
  auto h = request.header();
  const PullAsk ask = AskOf(request);
  const int64_t version = ask.exact ? ask.version : table.version();
  const bool every_row = request.type() == proto::MessageType::PULL && h.getEveryRow();
  Tensor rows, updates, ids;
  if (every_row) {
    table.Dump(&ids, &rows, &updates);
  } else if (Status s = table.Lookup(waiter.pull_ids, version, &rows, &updates); !s.ok()) {
    outbox_->Push(ErrorReply(request, s));
    return;
  }
  OutgoingMessage reply = ReplyTo(request, proto::MessageType::PULL_REPLY);
  reply.header().setVersion(version);
  reply.header().setClock(table.worker_clock(static_cast<int>(h.getSenderRank())));
  if (request.type() == proto::MessageType::PUSH) {  // thenPull: the push's outcome
    reply.header().setStaleness(waiter.push_staleness);
    if (!waiter.push_refusal.empty()) reply.header().setPushRefusal(waiter.push_refusal);
  }
  reply.AddTensor(rows, table.spec().variable_id, table.spec().chunk_id);
  reply.AddTensor(updates, table.spec().variable_id, table.spec().chunk_id);
  if (every_row) reply.AddTensor(ids, table.spec().variable_id, table.spec().chunk_id);
  counters_.pulls_served.fetch_add(1, std::memory_order_relaxed);
  outbox_->Push(std::move(reply));
}

void Shard::HandleTableReplicate(size_t index, const IncomingMessage& msg, Status* status) {
  TableChunk& table = *tables_[index];
  auto h = msg.header();
  Status& s = *status;
  switch (h.getReplicaOp()) {
    case proto::ReplicaOp::STATE: {
      Result<TableState> state = ReadTableReplicaState(msg, table.spec(), config_);
      s = state.ok() ? table.Restore(*state) : state.status();
      return;
    }
    case proto::ReplicaOp::STEP: {
      const int k = h.getStepGradients();
      if (msg.tensors().size() != (k > 0 ? 2u : 0u)) {
        s = ProtocolError("a step's sums of " + std::to_string(k) + " gradients carry " +
                          std::to_string(msg.tensors().size()) + " tensors, expected ids and sums");
        return;
      }
      s = table.ApplyStep(h.getVersion(), k > 0 ? msg.tensors()[0] : Tensor(),
                          k > 0 ? msg.tensors()[1] : Tensor(), k, &replica_counters_);
      return;
    }
    case proto::ReplicaOp::PUSH: {
      if (msg.tensors().size() != 3) {
        s = ProtocolError("a forwarded push of rows carries " +
                          std::to_string(msg.tensors().size()) + " tensors, expected 3");
        return;
      }
      // A push the primary refused (it forwards before applying) is refused here the same way
      // and changes nothing on either: acknowledged like the others.
      (void)table.Push(Contribution{.worker = h.getForWorker(),
                                    .base_version = h.getVersion(),
                                    .clock = h.getClock(),
                                    .gradient = msg.tensors()[1],
                                    .ids = msg.tensors()[0],
                                    .pulled_updates = msg.tensors()[2]},
                       &replica_counters_, h.getReplacesPending());
      return;
    }
    default:
      s = ProtocolError("a table partition takes no such replicate operation");
  }
}

}  // namespace towerps::ps
