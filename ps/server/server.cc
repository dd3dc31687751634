#include "ps/server/server.h"

#include <filesystem>
#include <random>

#include <kj/exception.h>

#include "common/logging.h"
#include "job/replica_placement.h"
#include "job/variable.h"
#include "job/variable_wire.h"
#include "ps/server/reply.h"
#include "ps/server/server_events.h"
#include "ps/server/tier_checkpoint.h"

namespace towerps::ps {

Server::Server(ServerOptions options)
    : options_(std::move(options)),
      incarnation_((uint64_t{std::random_device{}()} << 32 | std::random_device{}()) | 1),
      replicas_(options_.job, options_.rank, options_.rejoin, incarnation_),
      shards_(options_.threads, options_.job, &outbox_, &update_clock_),
      shutdown_(options_.job.workers, options_.shutdown_grace, options_.orphan_timeout),
      replies_(incarnation_),
      checkpoints_(options_.checkpoint_dir, options_.rank, options_.checkpoint_every,
                   options_.checkpoint_full_every) {}

Server::~Server() { shards_.Stop(); }

Result<std::unique_ptr<Server>> Server::Create(ServerOptions options) {
  TOWERPS_RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<Server> server(new Server(std::move(options)));
  const ServerOptions& o = server->options_;
  TOWERPS_ASSIGN_OR_RETURN(std::optional<Checkpoint> ck, server->checkpoints_.Find());
  TOWERPS_RETURN_IF_ERROR(server->shards_.OpenDisk(
      o.TierDir(), o.job, TierToRestore(ck ? &*ck : nullptr, o.checkpoint_dir, o.rank)));
  server->checkpoints_.set_disk(server->shards_.disk());
  TOWERPS_ASSIGN_OR_RETURN(server->transport_, Transport::Create(o.transport));
  TOWERPS_ASSIGN_OR_RETURN(server->socket_,
                           server->transport_->Listen(TcpEndpoint(o.bind, o.port)));
  server->replies_.set_socket(server->socket_.get());
  TOWERPS_RETURN_IF_ERROR(server->replicas_.Connect(*server->transport_, o.peers));
  if (!o.logdir.empty()) {
    TOWERPS_ASSIGN_OR_RETURN(server->events_, ServerEvents::Create(o.logdir, o.rank));
  }
  if (ck) {
    const std::string path = CheckpointPath(o.checkpoint_dir, o.rank);
    TOWERPS_RETURN_IF_ERROR(server->Restore(*ck).WithContext("refusing checkpoint " + path));
    TOWERPS_LOG(kInfo) << "restored " << path << " and " << ck->meta.delta
                       << " delta(s) after it, at version " << server->checkpoints_.last_version();
  }
  return server;
}

Status Server::Restore(const Checkpoint& ck) {
  const CheckpointMeta& m = ck.meta;
  if (m.server_rank != options_.rank || m.num_servers != options_.job.servers) {
    return FailedPreconditionError("it belongs to server " + std::to_string(m.server_rank) +
                                   " of " + std::to_string(m.num_servers) + ", this is server " +
                                   std::to_string(options_.rank) + " of " +
                                   std::to_string(options_.job.servers));
  }
  if (m.partition_bytes != options_.job.partition_bytes) {
    return FailedPreconditionError("it was written with --partition-bytes=" +
                                   std::to_string(m.partition_bytes));
  }
  TOWERPS_RETURN_IF_ERROR(CheckResumable(options_.job, m.job_fields));
  TOWERPS_RETURN_IF_ERROR(EstablishModel(m.variables, m.model_signature));
  if (ck.chunks.size() + ck.tables.size() != shards_.holders()) {
    return FailedPreconditionError("it holds " + std::to_string(ck.chunks.size()) + " chunks and " +
                                   std::to_string(ck.tables.size()) +
                                   " table partitions but this server owns " +
                                   std::to_string(shards_.holders()));
  }
  LowestVersion lowest;
  for (const ChunkState& c : ck.chunks) {
    TOWERPS_RETURN_IF_ERROR(shards_.Restore(c, c.variable_id, c.chunk_id, false));
    lowest.Add(c.version);
  }
  for (const TableState& t : ck.tables) {
    TOWERPS_RETURN_IF_ERROR(
        shards_.Restore(t, t.variable_id, t.chunk_id, checkpoints_.tracks_changes()));
    lowest.Add(t.version);
  }
  checkpoints_.Restored(lowest.value(), m);
  restored_version_ = lowest.value();
  StartShards();
  return Status::Ok();
}

Status Server::EstablishModel(const std::vector<VariableSpec>& variables, uint64_t signature) {
  TOWERPS_RETURN_IF_ERROR(CheckTablePolicies(options_.job.table_policies, variables));
  TOWERPS_ASSIGN_OR_RETURN(ChunkPlacement placement,
                           ChunkPlacement::ForJob(variables, options_.job));
  variables_ = variables;
  variables_hash_ = VariableListHash(variables_);
  model_signature_ = signature;
  // Values live in the transport's shared-memory arena: pulls from this host lend them in place.
  const TensorAllocator allocate = [t = transport_.get()](const Shape& s) {
    return t->Allocate(s);
  };
  shards_.Place(placement, variables, GroupsHeldBy(options_.job, options_.rank), options_.job,
                allocate, [this](int group) { return replicas_.RoleFor(group); });
  if (options_.log_device_placement) {
    TOWERPS_LOG(kInfo) << "chunk placement (" << placement.chunks().size() << " chunks, "
                       << options_.job.servers << " servers):\n"
                       << placement.Describe(variables) << "\n"
                       << DescribeTablePolicies(options_.job.table_policies, variables);
  }
  placement_ = std::move(placement);
  checkpoints_.set_meta({.job_fields = options_.job.ResumableFields(),
                         .model_signature = model_signature_,
                         .server_rank = options_.rank,
                         .num_servers = options_.job.servers,
                         .partition_bytes = options_.job.partition_bytes,
                         .variables = variables_});
  return Status::Ok();
}

void Server::StartShards() {
  if (shards_.started()) return;
  shards_.Start();
  // Replicates that came before the model (from a worker's register or a peer's joinReply), in
  // their order, before any later one.
  for (IncomingMessage& early : early_replicates_) Route(std::move(early));
  early_replicates_.clear();
}

Status Server::Run() {
  TOWERPS_LOG(kInfo) << "serving on " << endpoint() << " (" << kUpdateModes.Name(options_.job.mode)
                     << " mode, " << options_.job.workers << " workers, " << options_.threads
                     << " threads)";
  auto next_log = Deadline::After(options_.stats_log_interval);
  auto next_event = Deadline::After(options_.event_interval);
  constexpr auto kPollInterval = std::chrono::milliseconds(100);  // stop and join checks
  std::vector<Socket*> sockets = {socket_.get()};
  std::vector<int> link_ranks;
  replicas_.AppendSockets(&sockets, &link_ranks);
  replicas_.SendJoins(options_.join_timeout);
  Status orphaned;  // the job is gone: stop as on a request, then fail
  while (!shutdown_.ShouldStop() && !deposed_ && !(options_.stop && options_.stop->load())) {
    TOWERPS_RETURN_IF_ERROR(replicas_.CheckJoins());
    if (orphaned = shutdown_.CheckNotOrphaned(); !orphaned.ok()) break;
    TOWERPS_ASSIGN_OR_RETURN(
        std::vector<bool> ready,
        transport_->Poll(sockets, outbox_.wake_fd(), Deadline::After(kPollInterval)));
    for (size_t l = 0; l < link_ranks.size(); ++l) {
      if (!ready[l + 1]) continue;
      for (;;) {
        Result<IncomingMessage> msg =
            sockets[l + 1]->Receive(Deadline::After(std::chrono::milliseconds(0)));
        if (!msg.ok()) break;
        HandleLinkMessage(link_ranks[l], std::move(msg).value());
      }
    }
    if (ready[0]) {
      // Bounded batch, so replies never starve behind a flood of requests.
      for (int i = 0; i < 64; ++i) {
        Result<IncomingMessage> msg =
            socket_->Receive(Deadline::After(std::chrono::milliseconds(0)));
        if (!msg.ok()) break;  // timeout: drained; protocol errors were logged and counted
        HandleMessage(std::move(msg).value());
      }
    }
    // Snapshots for a checkpoint are asked for before the shards' outputs go: a shard that runs
    // on this thread takes them at once, and they leave with the rest.
    if (shards_.started()) checkpoints_.Tick(shards_.shards());
    shards_.Idle();
    SendOutputs();
    if (next_log.expired()) {
      LogStats();
      next_log = Deadline::After(options_.stats_log_interval);
    }
    if (events_ && next_event.expired()) {
      events_->Record(CollectStats());
      next_event = Deadline::After(options_.event_interval);
    }
  }
  shutdown_.LogWhyItStops(deposed_);
  shards_.Stop();
  for (ServerOutput& out : outbox_.DrainAll()) {
    if (auto* m = std::get_if<OutgoingMessage>(&out)) SendOrLog(std::move(*m));
  }
  // A failed final checkpoint fails the process: the state since the last one would be lost.
  Status final_checkpoint = shards_.started() ? checkpoints_.Final(shards_.shards()) : Status::Ok();
  LogStats();
  shards_.LogTables(variables_, options_.log_device_placement);
  if (events_) events_->Record(CollectStats());
  if (deposed_) {
    return FailedPreconditionError(
        "its peer replaced this server's copy of their chunks (it was found unresponsive); it "
        "must restart and rejoin as their backup");
  }
  if (orphaned.ok()) return final_checkpoint;
  if (final_checkpoint.ok()) return orphaned;
  TOWERPS_LOG(kError) << orphaned.ToString();  // both failed: the lost state is the worse news
  return final_checkpoint;
}

void Server::HandleMessage(IncomingMessage msg) {
  // Decoding validated every field (common/internal/wire_codec.h), so no getter should throw;
  // if one ever does, the message is rejected and the server goes on.
  try {
    Dispatch(std::move(msg));
  } catch (const kj::Exception& e) {
    ++rejected_by_handlers_;
    TOWERPS_LOG(kError) << "rejected a message that passed validation (a TowerPS bug): "
                        << e.getDescription().cStr();
  }
}

void Server::Dispatch(IncomingMessage msg) {
  replies_.Heard(msg.peer());
  shutdown_.Heard(msg.peer());
  if (replies_.RefusedAsPredecessors(msg)) return;
  if (const int peer = replicas_.PeerRank(msg.peer()); peer >= 0) {
    replicas_.Heard(peer, msg.header().getServerIncarnation());
  }
  switch (msg.type()) {
    case proto::MessageType::PING:
      return SendOrLog(ReplyTo(msg, proto::MessageType::PONG));
    case proto::MessageType::BUNDLE:  // each part as if it came alone
      for (IncomingMessage& part : replies_.bundles().Open(std::move(msg))) Route(std::move(part));
      return;
    case proto::MessageType::REGISTER:
      HandleRegister(msg);
      return;
    case proto::MessageType::STATS:
      HandleStats(msg);
      return;
    case proto::MessageType::SHUTDOWN:
      HandleShutdown(msg);
      return;
    case proto::MessageType::LEAVE:
      HandleLeave(msg);
      return;
    case proto::MessageType::INIT:
    case proto::MessageType::PUSH:
    case proto::MessageType::PULL:
      Route(std::move(msg));
      return;
    case proto::MessageType::REPLICATE:
      HandleReplicate(std::move(msg));
      return;
    case proto::MessageType::JOIN:
      HandleJoin(msg);
      return;
    case proto::MessageType::TAKE_OVER:
      if (replicas_.PeerRank(msg.peer()) >= 0) {
        HandleReplaced(msg);
      } else {
        HandleTakeOver(msg);
      }
      return;
    default:
      SendOrLog(ErrorReply(msg, InvalidArgumentError("a server does not accept " +
                                                     MessageTypeName(msg.type()) + " messages")));
  }
}

void Server::HandleRegister(const IncomingMessage& msg) {
  auto h = msg.header();
  const std::string who = "worker " + std::to_string(h.getSenderRank());
  const std::string me = "server " + std::to_string(options_.rank);
  Status s = CompareConfigFields(options_.job.Fields(), me, ReadConfigFields(h), who);
  if (s.ok() && h.getSenderRank() >= static_cast<uint32_t>(options_.job.workers)) {
    s = InvalidArgumentError(who + " is outside --workers=" + std::to_string(options_.job.workers));
  }
  const std::vector<VariableSpec> vars = ReadVariables(h);
  for (const VariableSpec& spec : vars) {
    if (s.ok()) s = ValidateVariableKind(spec).WithContext(who);
  }
  if (s.ok() && !placement_) {
    s = EstablishModel(vars, h.getModelSignature());
    if (s.ok()) StartShards();
  } else if (s.ok() && (h.getModelSignature() != model_signature_ ||
                        VariableListHash(vars) != variables_hash_)) {
    const std::string difference = FirstVariableDifference(vars, who, variables_, me);
    s = FailedPreconditionError(
        "model mismatch: " +
        (difference.empty() ? who + " declares the same variables with signature " +
                                  std::to_string(h.getModelSignature()) + " where " + me +
                                  " holds signature " + std::to_string(model_signature_)
                            : difference) +
        " (same --model for every process? a checkpoint from another model?)");
  }
  if (!s.ok()) {
    SendOrLog(ErrorReply(msg, s));
    return;
  }
  // The restored version, not the current one: in async modes other workers may already have
  // moved a fresh job forward, and that must not look like a restore.
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::REGISTER_REPLY);
  reply.header().setVersion(restored_version_);
  const std::set<int>& primary = replicas_.primary_groups();
  auto claims = reply.header().initPrimaryGroups(static_cast<unsigned>(primary.size()));
  unsigned c = 0;
  for (int g : primary) claims.set(c++, static_cast<uint32_t>(g));
  SendOrLog(std::move(reply));
  for (OutgoingMessage& held : replies_.bundles().Release(msg.peer())) SendOrLog(std::move(held));
  registered_.insert(h.getSenderRank());
  TOWERPS_LOG(kInfo) << who << " registered (" << PeerName(msg.peer()) << ")";
}

void Server::Route(IncomingMessage msg) {
  auto h = msg.header();
  const uint32_t variable = h.getVariableId(), chunk = h.getChunkId();
  if (!shards_.Holds(variable, chunk)) {
    SendOrLog(ErrorReply(
        msg, NotFoundError(
                 "server " + std::to_string(options_.rank) + " holds no variable " +
                 std::to_string(variable) + " chunk " + std::to_string(chunk) +
                 (placement_ ? " (wrong server for this chunk)" : " (nobody registered yet)"))));
    return;
  }
  ShardTask task;
  task.message.emplace(std::move(msg));
  shards_.Post(variable, chunk, std::move(task));
}

void Server::SendOutputs() {
  std::vector<OutgoingMessage> replies;
  for (ServerOutput& out : outbox_.DrainAll()) {
    if (auto* m = std::get_if<OutgoingMessage>(&out)) {
      replies.push_back(std::move(*m));
    } else if (auto* f = std::get_if<Forward>(&out)) {
      replicas_.Send(f->server, std::move(f->message));
    } else {
      checkpoints_.Add(std::move(std::get<SnapshotPart>(out)));
    }
  }
  replies_.SendBatch(std::move(replies));
}

ServerStatsReport Server::CollectStats() const {
  ServerStatsReport r;
  r.staleness_histogram.assign(kStalenessBuckets, 0);
  r.row_staleness_histogram.assign(kStalenessBuckets, 0);
  shards_.AddStats(&r, variables_);
  r.registered_workers.assign(registered_.begin(), registered_.end());
  AddSocketStats(socket_->stats(), &r);
  r.rejected_messages += rejected_by_handlers_ + replies_.bundles().rejected();
  r.refused_handshakes = socket_->refused_handshakes();
  r.refused_shutdowns = shutdown_.refused();
  r.checkpoints_written = checkpoints_.written();
  r.update_wall_nanos = update_clock_.nanos();
  r.since_first_update_nanos = update_clock_.SinceFirstNanos(BusyClock::Clock::now());
  return r;
}

void Server::HandleStats(const IncomingMessage& msg) {
  OutgoingMessage reply = ReplyTo(msg, proto::MessageType::STATS_REPLY);
  WriteStatsReport(CollectStats(), reply.header());
  SendOrLog(std::move(reply));
}

void Server::LogStats() { TOWERPS_LOG(kInfo) << "stats: " << StatsLine(CollectStats()); }

void Server::HandleShutdown(const IncomingMessage& msg) {
  const Status s = shutdown_.Asked(msg.peer(), PeerName(msg.peer()));
  SendOrLog(s.ok() ? ReplyTo(msg, proto::MessageType::PONG) : ErrorReply(msg, s));
}

void Server::HandleLeave(const IncomingMessage& msg) {
  const Result<int> rank = shutdown_.Left(msg.peer(), PeerName(msg.peer()));
  if (rank.ok()) shards_.WorkerFinished(*rank, msg.header().getVersion());
  SendOrLog(rank.ok() ? ReplyTo(msg, proto::MessageType::PONG) : ErrorReply(msg, rank.status()));
}

}  // namespace towerps::ps
