// The table half of Shard (ps/shard.h): pulls and pushes of a table partition's rows by id
// (ps/table_chunk.h).
//
// Messages (variableId, chunkId name the partition; common/proto/towerps.capnp):
//   pull       tensors: ids (uint64 [n]); version, clock and exactVersion as a chunk's pull
//   pullReply  tensors: rows (float32 [n, dim], in the pull's order), and each row's update
//              count (uint32 [n]); version: the partition's version the rows are at
//   push       tensors: ids (uint64 [n], unique and increasing), gradient rows (float32 [n, dim])
//              and each row's update count from the pull the gradient was computed from
//              (uint32 [n]); version and clock as a chunk's push
//   pushReply  version and staleness as a chunk's
// A request that does not fit (tensor count, dtypes, shapes, ids outside the bound or the
// partition, unsorted pushed ids) gets an error naming the table and changes nothing.
#include "common/logging.h"
#include "ps/reply.h"
#include "ps/shard.h"

namespace towerps::ps {

void Shard::HandleTable(size_t index, IncomingMessage msg) {
  const TableChunk& table = *tables_[index];
  switch (msg.type()) {
    case proto::MessageType::PULL: {
      Status bad = msg.tensors().size() == 1
                       ? table.CheckIds(msg.tensors()[0], /*sorted=*/false)
                       : InvalidArgumentError("a pull of rows carries " +
                                              std::to_string(msg.tensors().size()) +
                                              " tensors, expected 1 (the ids)");
      if (!bad.ok()) {
        outbox_->Push(ErrorReply(msg, bad));
      } else if (RowsReady(index, msg)) {
        ReplyRows(index, Waiter{std::move(msg)});
      } else {
        Wait(table_waiters_[index], Waiter{std::move(msg)});
      }
      return;
    }
    case proto::MessageType::PUSH:
      HandleTablePush(index, msg);
      table_versions_[index].store(table.version());
      AnswerReadyRowPulls(index);
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

void Shard::HandleTablePush(size_t index, const IncomingMessage& msg) {
  TableChunk& table = *tables_[index];
  auto h = msg.header();
  if (msg.tensors().size() != 3 || h.getThenPull()) {
    outbox_->Push(ErrorReply(
        msg, InvalidArgumentError(
                 h.getThenPull()
                     ? std::string("a push of rows cannot carry a pull; pull them apart")
                     : "a push of rows carries " + std::to_string(msg.tensors().size()) +
                           " tensors, expected 3 (ids, gradient rows, pulled update counts)")));
    return;
  }
  Contribution c{.worker = static_cast<int>(h.getSenderRank()),
                 .base_version = h.getVersion(),
                 .clock = h.getClock(),
                 .gradient = msg.tensors()[1],
                 .ids = msg.tensors()[0],
                 .pulled_updates = msg.tensors()[2]};
  Result<PushOutcome> out = table.Push(std::move(c), &counters_, h.getReplacesPending());
  if (!out.ok()) {
    outbox_->Push(ErrorReply(msg, out.status()));
    return;
  }
  if (out->kind == PushOutcome::Kind::kRejected) {
    RefuseNonFinite(msg, out->rejection);
    return;
  }
  const bool dropped =
      out->kind == PushOutcome::Kind::kDropped || out->kind == PushOutcome::Kind::kDuplicate;
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::PUSH_REPLY);
  reply.header().setVersion(out->version);
  reply.header().setStaleness(dropped ? -1 : out->staleness);
  outbox_->Push(std::move(reply));
}

bool Shard::RowsReady(size_t index, const IncomingMessage& request) const {
  auto h = request.header();
  return tables_[index]->PullReady(h.getVersion(), h.getClock());
}

void Shard::ReplyRows(size_t index, const Waiter& waiter) {
  const IncomingMessage& request = waiter.request;
  const TableChunk& table = *tables_[index];
  auto h = request.header();
  const int64_t version = h.getExactVersion() ? h.getVersion() : table.version();
  Tensor rows, updates;
  if (Status s = table.Lookup(request.tensors()[0], version, &rows, &updates); !s.ok()) {
    outbox_->Push(ErrorReply(request, s));
    return;
  }
  OutgoingMessage reply = ReplyTo(request, proto::MessageType::PULL_REPLY);
  reply.header().setVersion(version);
  reply.header().setClock(table.worker_clock(static_cast<int>(h.getSenderRank())));
  reply.AddTensor(rows, table.spec().variable_id, table.spec().chunk_id);
  reply.AddTensor(updates, table.spec().variable_id, table.spec().chunk_id);
  counters_.pulls_served.fetch_add(1, std::memory_order_relaxed);
  outbox_->Push(std::move(reply));
}

void Shard::AnswerReadyRowPulls(size_t index) {
  auto& waiting = table_waiters_[index];
  auto ready = std::stable_partition(waiting.begin(), waiting.end(),
                                     [&](const Waiter& w) { return !RowsReady(index, w.request); });
  for (auto it = ready; it != waiting.end(); ++it) ReplyRows(index, *it);
  waiting.erase(ready, waiting.end());
}

}  // namespace towerps::ps
