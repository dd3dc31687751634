// Server: one parameter-server process's state and loop. It owns the listening socket (driven by
// the I/O thread that calls Run) and `threads` shards that own the chunks placed on this rank.
//
// Message handling on the I/O thread: ping, register (configuration and model checks, placement),
// stats and shutdown are answered there; init, push and pull go to the owning shard. With one
// shard (`threads` 1) and no replicas the I/O thread runs it itself: no thread switch a request.
// Checkpoints are taken from shard snapshots at least every `checkpoint_every` versions and at
// shutdown (ps/server/checkpointer.h), and restored at start when a checkpoint file exists.
//
// Replication (--ps-replicas 2, job/replica_placement.h): the server holds the chunks of every
// group it is a replica of and a link to each server it shares a group with
// (ps/server/replica_links.h). Forwards from its shards go out on the link, and the backup's
// acknowledgements come back on it. A worker that finds a primary dead asks the backup to take
// over; a restarted server (`rejoin`) asks each peer to join, and the peer becomes the primary
// of the shared groups and sends it every chunk's state. A primary whose backup says it took
// over (the workers thought this one dead) stops serving: Run() returns an error and deposed()
// is true, so that the launcher restarts it, as a backup.
//
// Contract: Create() binds and restores; Run() serves until a shutdown message (a launcher's; the
// chief's once every worker has left or its grace is over: ps/server/shutdown_gate.h) or until
// `*stop` becomes true, then stops the shards and writes the final checkpoint. A failed periodic
// checkpoint (e.g. a full disk) is logged and serving goes on with the previous one kept; a
// failed final checkpoint is Run()'s error. Run() is called once, from one thread. Errors from
// Create/Run are user-facing Statuses.
#ifndef TOWERPS_PS_SERVER_SERVER_H_
#define TOWERPS_PS_SERVER_SERVER_H_

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/mailbox.h"
#include "common/transport.h"
#include "job/job_config.h"
#include "job/placement.h"
#include "job/replica_placement.h"
#include "job/version.h"
#include "ps/server/busy_clock.h"
#include "ps/server/checkpoint.h"
#include "ps/server/checkpointer.h"
#include "ps/server/replica_links.h"
#include "ps/server/server_options.h"
#include "ps/server/server_replies.h"
#include "ps/server/server_stats.h"
#include "ps/server/shard.h"
#include "ps/server/shard_set.h"
#include "ps/server/shutdown_gate.h"

namespace towerps::ps {

class ServerEvents;

class Server {
 public:
  static Result<std::unique_ptr<Server>> Create(ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& endpoint() const { return socket_->endpoint(); }
  Status Run();
  // After Run(): whether it stopped because a backup took its place.
  bool deposed() const { return deposed_; }

 private:
  explicit Server(ServerOptions options);
  Status Restore(const Checkpoint& checkpoint);
  Status EstablishModel(const std::vector<VariableSpec>& variables, uint64_t signature);
  void StartShards();
  void HandleMessage(IncomingMessage msg);
  void Dispatch(IncomingMessage msg);
  void HandleRegister(const IncomingMessage& msg);
  // A shutdown request, and a worker's `leave` (it is done), for ps/server/shutdown_gate.h.
  void HandleShutdown(const IncomingMessage& msg);
  void HandleLeave(const IncomingMessage& msg);
  void HandleStats(const IncomingMessage& msg);
  void Route(IncomingMessage msg);
  void SendOrLog(OutgoingMessage msg) { replies_.Send(std::move(msg)); }
  // The shards' outputs so far: forwards to replicas and snapshot parts as they come, the
  // replies as one batch (ServerReplies::SendBatch).
  void SendOutputs();
  void LogStats();
  // The counters of every shard and the socket, summed.
  ServerStatsReport CollectStats() const;
  // Replication (ps/server/server_replication.cc): messages from peer servers.
  void HandleLinkMessage(int peer, IncomingMessage msg);
  void HandleJoin(const IncomingMessage& msg);
  void HandleTakeOver(const IncomingMessage& msg);
  // A takeOver from a peer server: this process was replaced if it names its incarnation.
  void HandleReplaced(const IncomingMessage& msg);
  void HandleReplicate(IncomingMessage msg);
  // Posts `kind` to the shards for every chunk of the groups this server shares with `peer`,
  // and becomes their primary; returns how many chunks.
  size_t PromoteGroupsSharedWith(int peer, ShardTask::Kind kind);

  ServerOptions options_;
  // Random, drawn at start, in every reply (Header.serverIncarnation): how clients tell a
  // restarted server from the one they were talking to.
  const uint64_t incarnation_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Socket> socket_;
  ReplicaLinks replicas_;  // after the transport: its links close before the transport goes
  Mailbox<ServerOutput> outbox_;
  BusyClock update_clock_;  // the shards' updates in wall-clock time; outlives them
  ShardSet shards_;
  std::vector<VariableSpec> variables_;
  uint64_t variables_hash_ = 0;  // VariableListHash(variables_)
  uint64_t model_signature_ = 0;
  std::set<uint32_t> registered_;  // workers' ranks (the STATS reply lists them)
  std::optional<ChunkPlacement> placement_;
  std::vector<IncomingMessage> early_replicates_;  // joining: arrived before the model
  bool deposed_ = false;
  ShutdownGate shutdown_;
  ServerReplies replies_;
  Checkpointer checkpoints_;
  int64_t restored_version_ = kNoVersion;  // lowest chunk version restored; kNoVersion: fresh
  std::unique_ptr<ServerEvents> events_;   // with --logdir
  uint64_t rejected_by_handlers_ = 0;      // messages a handler could not read (see HandleMessage)
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SERVER_H_
