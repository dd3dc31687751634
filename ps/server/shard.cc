#include "ps/server/shard.h"

#include <algorithm>
#include <chrono>

#include "common/logging.h"
#include "job/replica_placement.h"
#include "ps/server/replica_state.h"
#include "ps/server/reply.h"
#include "towerps/check.h"

namespace towerps::ps {

Shard::Shard(int index, const JobConfig& config, Mailbox<ServerOutput>* outbox,
             BusyClock* update_clock)
    : index_(index), config_(config), outbox_(outbox), finished_(config) {
  counters_.busy = update_clock;  // a backup's replays are not in the stats: nor here
}

Shard::~Shard() { Stop(); }

size_t Shard::Add(std::unique_ptr<Holder> holder, ReplicaRole role) {
  TOWERPS_CHECK(!started_) << "Add after Start";
  const size_t index = holders_.size();
  if (role.kind != ReplicaRole::Kind::kOnly && config_.mode == UpdateMode::kSync) {
    holder->set_step_hook([this, index](int64_t step, const std::vector<Tensor>& sums, int k) {
      if (roles_[index].backup_live) ForwardStep(index, step, sums, k);
    });
  }
  holders_.push_back(std::move(holder));
  waiters_.emplace_back();
  roles_.push_back(role);
  return index;
}

std::string Shard::Where(size_t index) const {
  const ChunkSpec& spec = holders_[index]->spec();
  return "variable " + std::to_string(spec.variable_id) +
         (spec.is_table() ? " partition " : " chunk ") + std::to_string(spec.chunk_id);
}

void Shard::Start(bool own_thread) {
  versions_ = std::make_unique<std::atomic<int64_t>[]>(holders_.size());
  for (size_t i = 0; i < holders_.size(); ++i) versions_[i].store(holders_[i]->version());
  // Restored from a checkpoint: the backup restored its own, maybe of another version; it takes
  // this one's state, whose acknowledgement opens the pulls. (A table partition always holds
  // a version.)
  for (size_t i = 0; i < holders_.size(); ++i) {
    if (roles_[i].backup_live && holders_[i]->initialized()) Forward(i, proto::ReplicaOp::STATE);
  }
  own_thread_ = own_thread;
  started_ = true;
  if (own_thread_) {
    thread_ = std::thread([this] { Loop(); });
    return;
  }
  while (std::optional<ShardTask> task = inbox_.TryPop()) Run(std::move(*task));
}

void Shard::Stop() {
  if (!started_) return;
  started_ = false;
  if (!own_thread_) return outbox_.Flush();  // what it holds goes first
  ShardTask stop;
  stop.kind = ShardTask::Kind::kStop;
  inbox_.Push(std::move(stop));
  thread_.join();
}

void Shard::Post(ShardTask task) {
  // Before Start (or after Stop) a task waits in the inbox, as for a shard with a thread.
  if (own_thread_ || !started_) return inbox_.Push(std::move(task));
  Run(std::move(task));
}

void Shard::Idle() {
  TOWERPS_CHECK(!own_thread_) << "Idle is for a shard without a thread of its own";
  outbox_.Flush();  // no backups to check: a replicated shard has its own thread (ShardSet)
}

int64_t Shard::MinVersion() const {
  LowestVersion lowest;
  for (size_t i = 0; i < holders_.size(); ++i) lowest.Add(versions_[i].load());
  return lowest.value();
}

int64_t Shard::MaxVersion() const {
  int64_t v = kNoVersion;
  for (size_t i = 0; i < holders_.size(); ++i) v = std::max(v, versions_[i].load());
  return v;
}

void Shard::Loop() {
  for (;;) {
    std::optional<ShardTask> task = inbox_.TryPop();
    if (!task) {  // what the tasks so far produced goes now, before the shard waits
      outbox_.Flush();
      // Waking once a second costs nothing and keeps a lost wake-up from hanging the shard.
      task = inbox_.WaitPop(NextWake());
    }
    DropSilentBackups();
    if (task && !Run(std::move(*task))) return outbox_.Flush();  // what it holds goes first
  }
}

bool Shard::Run(ShardTask task) noexcept {
  switch (task.kind) {
    case ShardTask::Kind::kStop:
      return false;
    case ShardTask::Kind::kSnapshot: {
      SnapshotPart part;
      part.shard = index_;
      for (const auto& h : holders_) part.states.push_back(h->SaveCheckpoint(task.save));
      if (task.meet) task.meet();  // e.g. no shard writes to the tier till it is kept
      outbox_.Push(std::move(part));
      break;
    }
    case ShardTask::Kind::kRequest:
      Handle(task.chunk, std::move(*task.message));
      break;
    case ShardTask::Kind::kPromote:
    case ShardTask::Kind::kPeerJoined:
      Promote(task.chunk, task.kind == ShardTask::Kind::kPeerJoined);
      break;
    case ShardTask::Kind::kAck:
      Acknowledged(task.chunk, task.version);
      break;
    case ShardTask::Kind::kWorkerFinished:
      WorkerFinished(task.worker, task.version);
      break;
  }
  return true;
}

void Shard::Handle(size_t index, IncomingMessage msg) {
  if (msg.type() == proto::MessageType::REPLICATE) {
    HandleReplicate(index, msg);
    return;
  }
  if (const ReplicaRole& role = roles_[index];
      role.kind == ReplicaRole::Kind::kBackup || role.kind == ReplicaRole::Kind::kJoining) {
    outbox_.Push(ErrorReply(
        msg, FailedPreconditionError(std::string(kNotPrimaryMarker) + " " + Where(index) +
                                     "; its primary is server " + std::to_string(role.peer))));
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
    case proto::MessageType::PULL: {
      auto h = msg.header();
      PullAsk ask{.version = h.getVersion(), .clock = h.getClock(), .exact = h.getExactVersion()};
      if (Status s = holders_[index]->ReadPull(msg, &ask); !s.ok()) {
        outbox_.Push(ErrorReply(msg, s));
        return;
      }
      AnswerOrWait(index, Waiter{std::move(msg), std::move(ask)});
      return;  // a pull changes nothing
    }
    default:
      outbox_.Push(ErrorReply(
          msg, InvalidArgumentError("a shard cannot serve " + MessageTypeName(msg.type()))));
      return;
  }
  if (!changed) return;
  versions_[index].store(holders_[index]->version());
  AnswerReadyPulls(index);
}

bool Shard::HandleInit(size_t index, IncomingMessage msg, bool forward) {
  Holder& holder = *holders_[index];
  Result<bool> applied = holder.Init(msg);
  if (!applied.ok()) {
    outbox_.Push(ErrorReply(msg, applied.status()));
    return false;
  }
  if (*applied && forward) Forward(index, proto::ReplicaOp::INIT, msg.tensors(), &msg);
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::INIT_REPLY);
  reply.header().setVersion(holder.version());
  outbox_.Push(std::move(reply));
  return true;
}

bool Shard::HandlePush(size_t index, IncomingMessage msg, bool forward) {
  Holder& holder = *holders_[index];
  auto h = msg.header();
  PullAsk next{.version = h.getPullVersion(), .clock = h.getPullClock()};
  Result<Contribution> c = holder.ReadPush(msg, static_cast<int>(h.getSenderRank()), &next);
  if (!c.ok()) {
    outbox_.Push(ErrorReply(msg, c.status()));
    return false;
  }
  c->sender_checked_finite = h.getFinite();
  if (h.getThenPull()) holder.Prefetch(next);  // read meanwhile what the pull will want
  // Async/SSP: forwarded first, so that the backup applies it while this holder does. The
  // backup runs the same code on the same state: it drops or refuses exactly what this one
  // does. Sync forwards each step's sums instead (the step hook, Add).
  if (forward && config_.mode != UpdateMode::kSync) {
    Forward(index, proto::ReplicaOp::PUSH, c->Tensors(), &msg);
  }
  Result<PushOutcome> out = holder.Push(std::move(c).value(), &counters_, h.getReplacesPending());
  if (!out.ok()) {
    outbox_.Push(ErrorReply(msg, out.status()));
    return true;  // the forward is acknowledged all the same
  }
  const bool dropped =
      out->kind == PushOutcome::Kind::kDropped || out->kind == PushOutcome::Kind::kDuplicate;
  const bool refused = out->kind == PushOutcome::Kind::kRejected;
  if (h.getThenPull()) {
    // Answered with the pull, below or by a later update: a refused gradient too, so that a
    // worker going on past its divergence (--on-nonfinite continue) still gets the values.
    if (refused) NoteRefusal(msg, out->rejection);
    // The holder keeps the gradient for as long as it needs it; the waiting request need
    // not, so a loan from the worker ends with the step (its release rides on this reply)
    // rather than a step later.
    msg.DropPayloads();
    AnswerOrWait(index, Waiter{std::move(msg), std::move(next), dropped ? -1 : out->staleness,
                               refused ? out->rejection : std::string()});
    return true;
  }
  if (refused) {
    RefuseNonFinite(msg, out->rejection);
    return true;  // the push may have completed a sync step: pulls can be ready
  }
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::PUSH_REPLY);
  reply.header().setVersion(out->version);
  reply.header().setStaleness(dropped ? -1 : out->staleness);
  outbox_.Push(std::move(reply));
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
  outbox_.Push(std::move(reply));
}

void Shard::AnswerOrWait(size_t index, Waiter waiter) {
  if (PullReady(index, waiter.ask)) {
    Reply(index, waiter);
    return;
  }
  if (const std::string why = finished_.WhyUnreachable(waiter.ask.version); !why.empty()) {
    outbox_.Push(ErrorReply(waiter.request, FailedPreconditionError(why)));
    return;
  }
  auto& waiting = waiters_[index];
  if (waiting.size() >= static_cast<size_t>(4 * config_.workers + 16)) {
    outbox_.Push(
        ErrorReply(waiter.request, ResourceExhaustedError("too many pulls waiting on one chunk")));
    return;
  }
  waiting.push_back(std::move(waiter));
}

void Shard::AnswerReadyPulls(size_t index) {
  auto& waiting = waiters_[index];
  auto ready = std::stable_partition(waiting.begin(), waiting.end(),
                                     [&](const Waiter& w) { return !PullReady(index, w.ask); });
  for (auto it = ready; it != waiting.end(); ++it) Reply(index, *it);
  waiting.erase(ready, waiting.end());
}

bool Shard::PullReady(size_t index, const PullAsk& ask) const {
  if (!holders_[index]->PullReady(ask.version, ask.clock)) return false;
  // A primary shows a worker only what its backup holds too.
  const ReplicaRole& role = roles_[index];
  return !role.backup_live || role.acked >= ask.version;
}

void Shard::WorkerFinished(int worker, int64_t last_step) {
  finished_.Add(worker, last_step);
  for (size_t i = 0; i < waiters_.size(); ++i) {
    auto& waiting = waiters_[i];
    auto doomed = std::stable_partition(waiting.begin(), waiting.end(), [&](const Waiter& w) {
      return PullReady(i, w.ask) || finished_.WhyUnreachable(w.ask.version).empty();
    });
    for (auto it = doomed; it != waiting.end(); ++it) {
      outbox_.Push(ErrorReply(it->request,
                              FailedPreconditionError(finished_.WhyUnreachable(it->ask.version))));
    }
    waiting.erase(doomed, waiting.end());
  }
}

void Shard::Reply(size_t index, const Waiter& waiter) {
  const IncomingMessage& request = waiter.request;
  const Holder& holder = *holders_[index];
  OutgoingMessage reply = ReplyTo(request, proto::MessageType::PULL_REPLY);
  if (Status s = holder.AddPullValues(waiter.ask, &reply); !s.ok()) {
    outbox_.Push(ErrorReply(request, s));
    return;
  }
  reply.header().setClock(holder.worker_clock(static_cast<int>(request.header().getSenderRank())));
  if (request.type() == proto::MessageType::PUSH) {  // thenPull: the push's outcome
    reply.header().setStaleness(waiter.push_staleness);
    if (!waiter.push_refusal.empty()) reply.header().setPushRefusal(waiter.push_refusal);
  }
  counters_.pulls_served.fetch_add(1, std::memory_order_relaxed);
  outbox_.Push(std::move(reply));
}

}  // namespace towerps::ps
