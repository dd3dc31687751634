// Server: one parameter-server process's state and loop. It owns the listening socket (driven by
// the I/O thread that calls Run) and `threads` shards that own the chunks placed on this rank.
//
// Message handling on the I/O thread: ping, register (configuration and model checks, placement),
// stats and shutdown are answered there; init, push and pull go to the owning shard. Checkpoints
// are taken from shard snapshots at least every `checkpoint_every` versions and at shutdown
// (ps/server/checkpointer.h), and
// restored at start when a checkpoint file exists.
//
// Replication (--ps-replicas 2, job/replica_placement.h): the server holds the chunks of every
// group it is a replica of and keeps a link (a DEALER socket, identity "server:<rank>") to each
// server it shares a group with. Forwards from its shards go out on the link, and the backup's
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
#include "ps/server/server_stats.h"
#include "ps/server/shard.h"
#include "ps/server/shutdown_gate.h"

namespace towerps::ps {

class ServerEvents;

struct ServerOptions {
  int rank = 0;
  std::string bind = "127.0.0.1";  // interface address to listen on
  int port = 0;                    // 0: any free port (see Server::endpoint)
  int threads = 1;                 // shards (ps/server/server_threads.h: --threads auto)
  std::string checkpoint_dir;      // empty: no checkpoints
  int64_t checkpoint_every = 0;    // versions between checkpoints; 0: only at shutdown
  bool log_device_placement = false;
  std::chrono::milliseconds stats_log_interval{10000};
  // TensorBoard event files in <logdir>/ps-<rank>, written every event_interval
  // (ps/server/server_events.h).
  std::string logdir;
  std::chrono::milliseconds event_interval{1000};
  const std::atomic<bool>* stop = nullptr;  // borrowed; set by a signal handler, may be null
  // Replication: every server's endpoint (index = rank), and whether this server restarted and
  // must take its chunks' state from its peers.
  std::vector<std::string> peers;
  bool rejoin = false;
  std::chrono::milliseconds join_timeout{30000};
  // How long a chief's shutdown waits for the other workers to leave (ps/server/shutdown_gate.h).
  std::chrono::milliseconds shutdown_grace{60000};
  TransportOptions transport;
  JobConfig job;
};

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
  struct ChunkHome {
    int shard;
    size_t index;  // the holder's slot in its shard
  };
  explicit Server(ServerOptions options);
  Status Restore(const Checkpoint& checkpoint);
  // Restores one holder's saved state, found by its (variable, chunk).
  Status RestoreHolder(const HolderState& state, uint32_t variable_id, uint32_t chunk_id);
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
  void SendOrLog(OutgoingMessage msg);
  void LogStats();
  // With --log-device-placement, at the end: the rows each table partition here holds.
  void LogTableRows() const;
  // The counters of every shard and the socket, summed.
  ServerStatsReport CollectStats() const;
  // Replication (ps/server/server_replication.cc).
  ReplicaRole RoleFor(int group) const;
  Status ConnectPeers();
  void SendJoins();
  Status CheckJoins();
  void HandleLinkMessage(int peer, IncomingMessage msg);
  void HandleJoin(const IncomingMessage& msg);
  void HandleTakeOver(const IncomingMessage& msg);
  // A takeOver from a peer server: this process was replaced if it names its incarnation.
  void HandleReplaced(const IncomingMessage& msg);
  // The rank of a peer server from its routing id ("server:3"); -1 for anyone else.
  int PeerRank(const std::string& routing_id) const;
  void HandleReplicate(IncomingMessage msg);
  // Posts `kind` to the shards for every chunk of the groups this server shares with `peer`,
  // and becomes their primary; returns how many chunks.
  size_t PromoteGroupsSharedWith(int peer, ShardTask::Kind kind);
  void SendToPeer(int peer, OutgoingMessage msg);

  ServerOptions options_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Socket> socket_;
  Mailbox<ServerOutput> outbox_;
  BusyClock update_clock_;  // the shards' updates in wall-clock time; outlives them
  std::vector<std::unique_ptr<Shard>> shards_;
  bool shards_started_ = false;
  std::vector<VariableSpec> variables_;
  uint64_t variables_hash_ = 0;  // VariableListHash(variables_)
  uint64_t model_signature_ = 0;
  std::optional<ChunkPlacement> placement_;
  std::map<std::pair<uint32_t, uint32_t>, ChunkHome> homes_;
  std::map<std::pair<uint32_t, uint32_t>, int> groups_;  // chunk -> its replica group
  std::map<int, std::unique_ptr<Socket>> links_;         // peer rank -> link
  std::set<int> primary_groups_;                         // groups this server is the primary of
  std::set<int> joins_pending_;                          // peers whose joinReply is awaited
  std::map<int, uint64_t> peer_incarnations_;  // the last incarnation each peer's messages carried
  // Peers a reply could not reach, logged once until they are heard from again.
  std::set<std::string> unreachable_peers_;
  Deadline joins_due_ = Deadline::After(std::chrono::hours(1));
  std::vector<IncomingMessage> early_replicates_;  // joining: arrived before the model
  bool deposed_ = false;
  ShutdownGate shutdown_;
  Checkpointer checkpoints_;
  int64_t restored_version_ = kNoVersion;  // lowest chunk version restored; kNoVersion: fresh
  std::unique_ptr<ServerEvents> events_;   // with --logdir
  uint64_t rejected_by_handlers_ = 0;      // messages a handler could not read (see HandleMessage)
  // Random, drawn at start, in every reply (Header.serverIncarnation): how clients tell a
  // restarted server from the one they were talking to.
  const uint64_t incarnation_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SERVER_H_
