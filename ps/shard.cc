#include "ps/shard.h"

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "ps/replica_set.h"
#include "ps/reply.h"
#include "towerps/check.h"

namespace towerps::ps {

Shard::Shard(int index, const JobConfig& config, Mailbox<ServerOutput>* outbox,
             BusyClock* update_clock)
    : index_(index), config_(config), outbox_(outbox) {
  counters_.busy = update_clock;  // a backup's replays are not in the stats: nor here
}

Shard::~Shard() { Stop(); }

size_t Shard::AddChunk(std::unique_ptr<Chunk> chunk, ReplicaRole role) {
  TOWERPS_CHECK(!thread_.joinable()) << "AddChunk after Start";
  if (role.kind != ReplicaRole::Kind::kOnly && config_.mode == UpdateMode::kSync) {
    const size_t index = chunks_.size();
    chunk->set_step_hook([this, index](int64_t step, const Tensor& sum, int k) {
      if (roles_[index].backup_live) ForwardStep(index, step, sum, k);
    });
  }
  chunks_.push_back(std::move(chunk));
  tables_.emplace_back();
  waiters_.emplace_back();
  roles_.push_back(role);
  return chunks_.size() - 1;
}

size_t Shard::AddTable(std::unique_ptr<TableChunk> table, ReplicaRole role) {
  TOWERPS_CHECK(!thread_.joinable()) << "AddTable after Start";
  const size_t index = chunks_.size();
  if (role.kind != ReplicaRole::Kind::kOnly && config_.mode == UpdateMode::kSync) {
    table->set_step_hook([this, index](int64_t step, const Tensor& ids, const Tensor& sums, int k) {
      if (roles_[index].backup_live) ForwardTableStep(index, step, ids, sums, k);
    });
  }
  chunks_.emplace_back();
  tables_.push_back(std::move(table));
  waiters_.emplace_back();
  roles_.push_back(role);
  return index;
}

const ChunkSpec& Shard::SpecOf(size_t index) const {
  return tables_[index] ? tables_[index]->spec() : chunks_[index]->spec();
}

int64_t Shard::VersionOf(size_t index) const {
  return tables_[index] ? tables_[index]->version() : chunks_[index]->version();
}

void Shard::Start() {
  versions_ = std::make_unique<std::atomic<int64_t>[]>(chunks_.size());
  for (size_t i = 0; i < chunks_.size(); ++i) versions_[i].store(VersionOf(i));
  // Restored from a checkpoint: the backup restored its own, maybe of another version; it takes
  // this one's state, whose acknowledgement opens the pulls. (A table partition always holds
  // a version.)
  for (size_t i = 0; i < chunks_.size(); ++i) {
    if (roles_[i].backup_live && (tables_[i] || chunks_[i]->initialized())) {
      Forward(i, proto::ReplicaOp::STATE, nullptr);
    }
  }
  thread_ = std::thread([this] { Loop(); });
}

void Shard::Stop() {
  if (!thread_.joinable()) return;
  ShardTask stop;
  stop.kind = ShardTask::Kind::kStop;
  Post(std::move(stop));
  thread_.join();
}

int64_t Shard::MinVersion() const {
  LowestVersion lowest;
  for (size_t i = 0; i < chunks_.size(); ++i) lowest.Add(versions_[i].load());
  return lowest.value();
}

int64_t Shard::MaxVersion() const {
  int64_t v = kNoVersion;
  for (size_t i = 0; i < chunks_.size(); ++i) v = std::max(v, versions_[i].load());
  return v;
}

void Shard::Loop() {
  for (;;) {
    // Waking once a second costs nothing and keeps a lost wake-up from ever hanging the shard.
    std::optional<ShardTask> task = inbox_.WaitPop(NextWake());
    DropSilentBackups();
    if (!task) continue;
    switch (task->kind) {
      case ShardTask::Kind::kStop:
        return;
      case ShardTask::Kind::kSnapshot: {
        SnapshotPart part;
        part.shard = index_;
        for (const auto& c : chunks_) {
          if (c) part.chunks.push_back(c->Snapshot());
        }
        for (const auto& t : tables_) {
          if (t) part.tables.push_back(t->Snapshot());
        }
        outbox_->Push(std::move(part));
        break;
      }
      case ShardTask::Kind::kRequest:
        Handle(task->chunk, std::move(*task->message));
        break;
      case ShardTask::Kind::kPromote:
      case ShardTask::Kind::kPeerJoined:
        Promote(task->chunk, task->kind == ShardTask::Kind::kPeerJoined);
        break;
      case ShardTask::Kind::kAck:
        Acknowledged(task->chunk, task->version);
        break;
    }
  }
}

void Shard::Handle(size_t index, IncomingMessage msg) {
  if (msg.type() == proto::MessageType::REPLICATE) {
    HandleReplicate(index, msg);
    return;
  }
  if (const ReplicaRole& role = roles_[index];
      role.kind == ReplicaRole::Kind::kBackup || role.kind == ReplicaRole::Kind::kJoining) {
    const ChunkSpec& spec = SpecOf(index);
    outbox_->Push(ErrorReply(
        msg, FailedPreconditionError(
                 std::string(kNotPrimaryMarker) + " variable " + std::to_string(spec.variable_id) +
                 (spec.is_table() ? " partition " : " chunk ") + std::to_string(spec.chunk_id) +
                 "; its primary is server " + std::to_string(role.peer))));
    return;
  }
  if (tables_[index]) {
    HandleTable(index, std::move(msg));
    return;
  }
  const bool forward = roles_[index].backup_live;
  bool changed = false;
  switch (msg.type()) {
    case proto::MessageType::INIT:
      changed = HandleInit(index, std::move(msg), forward);
      break;
    case proto::MessageType::PUSH:
      changed = HandlePush(index, std::move(msg), forward);
      break;
    case proto::MessageType::PULL:
      if (PullReady(index, msg)) {
        ReplyPull(index, Waiter{std::move(msg)});
      } else {
        Wait(waiters_[index], Waiter{std::move(msg)});
      }
      return;  // a pull changes nothing
    default:
      outbox_->Push(ErrorReply(
          msg, InvalidArgumentError("a shard cannot serve " + MessageTypeName(msg.type()))));
      return;
  }
  if (!changed) return;
  versions_[index].store(chunks_[index]->version());
  AnswerReadyPulls(index);
}

bool Shard::HandleInit(size_t index, IncomingMessage msg, bool forward) {
  Chunk& chunk = *chunks_[index];
  if (msg.tensors().size() != 1) {
    outbox_->Push(ErrorReply(
        msg, InvalidArgumentError("init carries " + std::to_string(msg.tensors().size()) +
                                  " tensors, expected 1")));
    return false;
  }
  Result<bool> applied = chunk.Init(msg.tensors()[0]);
  if (!applied.ok()) {
    outbox_->Push(ErrorReply(msg, applied.status()));
    return false;
  }
  if (*applied && forward) Forward(index, proto::ReplicaOp::INIT, &msg);
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::INIT_REPLY);
  reply.header().setVersion(chunk.version());
  outbox_->Push(std::move(reply));
  return true;
}

bool Shard::HandlePush(size_t index, IncomingMessage msg, bool forward) {
  Chunk& chunk = *chunks_[index];
  auto h = msg.header();
  if (msg.tensors().size() != 1) {
    outbox_->Push(ErrorReply(
        msg, InvalidArgumentError("push carries " + std::to_string(msg.tensors().size()) +
                                  " tensors, expected 1")));
    return false;
  }
  // Async/SSP: forwarded first, so that the backup applies it while this chunk does. The
  // backup runs the same code on the same state: it drops or refuses exactly what this chunk
  // does. Sync forwards each step's sum instead (the step hook, AddChunk).
  if (forward && config_.mode != UpdateMode::kSync) {
    Forward(index, proto::ReplicaOp::PUSH, &msg);
  }
  Result<PushOutcome> out =
      chunk.Push(static_cast<int>(h.getSenderRank()), h.getVersion(), h.getClock(),
                 msg.tensors()[0], &counters_, h.getReplacesPending());
  if (!out.ok()) {
    outbox_->Push(ErrorReply(msg, out.status()));
    return true;  // the forward is acknowledged all the same
  }
  const bool dropped =
      out->kind == PushOutcome::Kind::kDropped || out->kind == PushOutcome::Kind::kDuplicate;
  const bool refused = out->kind == PushOutcome::Kind::kRejected;
  if (h.getThenPull()) {
    // Answered with the pull, below or by a later update: a refused gradient too, so that a
    // worker going on past its divergence (--on-nonfinite continue) still gets the values.
    if (refused) NoteRefusal(msg, out->rejection);
    // The chunk holds the gradient for as long as it needs it; the waiting request need
    // not, so a loan from the worker ends with the step (its release rides on this reply)
    // rather than a step later.
    msg.DropPayloads();
    Waiter waiter{std::move(msg), dropped ? -1 : out->staleness,
                  refused ? out->rejection : std::string()};
    if (PullReady(index, waiter.request)) {
      ReplyPull(index, waiter);
    } else {
      Wait(waiters_[index], std::move(waiter));
    }
    return true;
  }
  if (refused) {
    RefuseNonFinite(msg, out->rejection);
    return true;  // the push may have completed a sync step: pulls can be ready
  }
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::PUSH_REPLY);
  reply.header().setVersion(out->version);
  reply.header().setStaleness(dropped ? -1 : out->staleness);
  outbox_->Push(std::move(reply));
  return true;
}

void Shard::NoteRefusal(const IncomingMessage& msg, const std::string& why) {
  // Logged once per worker (a diverged worker in --on-nonfinite continue sends little else);
  // every refusal is counted in the server's stats.
  const uint32_t worker = msg.header().getSenderRank();
  if (nonfinite_logged_.insert(worker).second) {
    TOWERPS_LOG(kWarning) << why << "; further non-finite gradients from worker " << worker
                          << " are refused without a log line (counted in the stats)";
  }
}

void Shard::RefuseNonFinite(const IncomingMessage& msg, const std::string& why) {
  NoteRefusal(msg, why);
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::ERROR);
  SetStatus(reply.header(), InvalidArgumentError(why));
  outbox_->Push(std::move(reply));
}

void Shard::Wait(std::vector<Waiter>& waiting, Waiter waiter) {
  if (waiting.size() >= static_cast<size_t>(4 * config_.workers + 16)) {
    outbox_->Push(
        ErrorReply(waiter.request, ResourceExhaustedError("too many pulls waiting on one chunk")));
    return;
  }
  waiting.push_back(std::move(waiter));
}

void Shard::AnswerReadyPulls(size_t index) {
  auto& waiting = waiters_[index];
  const bool table = tables_[index] != nullptr;
  auto ready = std::stable_partition(waiting.begin(), waiting.end(), [&](const Waiter& w) {
    return !(table ? RowsReady(index, w.request) : PullReady(index, w.request));
  });
  for (auto it = ready; it != waiting.end(); ++it) {
    if (table) {
      ReplyRows(index, *it);
    } else {
      ReplyPull(index, *it);
    }
  }
  waiting.erase(ready, waiting.end());
}

Shard::PullAsk Shard::AskOf(const IncomingMessage& request) {
  auto h = request.header();
  if (request.type() == proto::MessageType::PUSH) return {h.getPullVersion(), h.getPullClock()};
  return {h.getVersion(), h.getClock(), h.getExactVersion()};
}

bool Shard::PullReady(size_t index, const IncomingMessage& request) const {
  const PullAsk ask = AskOf(request);
  if (!chunks_[index]->PullReady(ask.version, ask.clock)) return false;
  // A primary shows a worker only what its backup holds too.
  const ReplicaRole& role = roles_[index];
  return !role.backup_live || role.acked >= ask.version;
}

void Shard::ReplyPull(size_t index, const Waiter& waiter) {
  const IncomingMessage& request = waiter.request;
  const Chunk& chunk = *chunks_[index];
  const Tensor* values = &chunk.values();
  int64_t version = chunk.version();
  if (const PullAsk ask = AskOf(request); ask.exact) {
    version = ask.version;
    values = chunk.ValuesAt(version);
    if (values == nullptr) {
      outbox_->Push(ErrorReply(
          request, FailedPreconditionError("version " + std::to_string(version) + " of variable " +
                                           std::to_string(chunk.spec().variable_id) + " chunk " +
                                           std::to_string(chunk.spec().chunk_id) +
                                           " is no longer held (the chunk is "
                                           "at version " +
                                           std::to_string(chunk.version()) +
                                           "; servers keep one version back, in sync mode)")));
      return;
    }
  }
  OutgoingMessage reply = ReplyTo(request, proto::MessageType::PULL_REPLY);
  reply.header().setVersion(version);
  reply.header().setClock(chunk.worker_clock(static_cast<int>(request.header().getSenderRank())));
  if (request.type() == proto::MessageType::PUSH) {  // thenPull: the push's outcome
    reply.header().setStaleness(waiter.push_staleness);
    if (!waiter.push_refusal.empty()) reply.header().setPushRefusal(waiter.push_refusal);
  }
  // Zero copy: the chunk writes its next update elsewhere while this buffer is shared.
  reply.AddTensor(*values, chunk.spec().variable_id, chunk.spec().chunk_id);
  counters_.pulls_served.fetch_add(1, std::memory_order_relaxed);
  outbox_->Push(std::move(reply));
}

}  // namespace towerps::ps
