// Shard: a server thread that owns a set of chunks and table partitions and serves their init,
// push and pull requests, so that each is touched by one thread only and needs no lock. Chunks
// and partitions share one index space (a slot each): their waiting pulls, versions and replica
// roles are kept alike. Table partitions (ps/table_chunk.h) are pulled and pushed by id; their
// requests are served in ps/shard_tables.cc.
//
// The server's I/O thread posts requests with Post(); the shard answers through the server's
// outbox (replies to send, snapshots for checkpoints). A pull that cannot be answered yet (the
// chunk is below the asked version, not initialised, or SSP holds it back) waits inside the shard
// and is answered by the update that makes it ready: no polling.
//
// Replication (--ps-replicas 2, ps/replica_set.h). Each chunk has a ReplicaRole. A primary
// forwards what changes the chunk to its backup, in the order it applies it (a Forward on the
// outbox, sent by the server's link to that peer): the init; in sync mode each completed step's
// sum of gradients (one tensor per step, whatever the number of workers); in async and SSP every
// push, before applying it, so that both apply it at once. It answers a pull for at least
// version v only once the backup acknowledged v. In full sync that is the version served, so
// whatever a worker saw the backup holds too; in async and SSP the values served may be a few
// pushes newer, and after a failover the workers redo the iterations the backup lacks (their
// clocks there say which). A table partition is replicated alike, its sync step being the
// summed rows of the ids the step touched (TableChunk::ApplyStep).
// A backup replays forwards through the same Chunk code, so both hold the same bits; it refuses
// requests from workers. A backup that does not acknowledge within kBackupAckTimeout is dropped
// (the primary serves alone, logged) until it rejoins; a joining one receives the whole chunk
// first (Snapshot(true)) and ignores forwards that precede it. A promoted backup (the primary
// died) refuses the old primary's forwards, which tells a primary that was only thought dead
// that it has been replaced (ps/server.h).
//
// Contract: AddChunk() and AddTable() only before Start(). Post() is thread-safe. Stop() joins
// the thread; after it, chunks() and tables() may be read by the caller.
#ifndef TOWERPS_PS_SHARD_H_
#define TOWERPS_PS_SHARD_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "common/mailbox.h"
#include "common/message.h"
#include "ps/chunk.h"
#include "ps/server_stats.h"
#include "ps/table_chunk.h"
#include "ps/version.h"

namespace towerps::ps {

inline constexpr std::chrono::milliseconds kBackupAckTimeout{2000};

struct ShardTask {
  enum class Kind {
    kRequest,     // message: init, push, pull or replicate for `chunk`
    kSnapshot,    // every chunk's state, for a checkpoint
    kPromote,     // `chunk`'s other replica is gone: become its primary
    kPeerJoined,  // `chunk`'s other replica restarted: become (or stay) primary, send it the state
    kAck,         // the backup of `chunk` applied forwards up to `version`
    kStop
  } kind = Kind::kRequest;
  size_t chunk = 0;                        // the chunk's or table partition's index (slot)
  std::optional<IncomingMessage> message;  // kRequest
  int64_t version = 0;                     // kAck
};

// How one chunk is replicated; kOnly without --ps-replicas.
struct ReplicaRole {
  enum class Kind { kOnly, kPrimary, kBackup, kJoining } kind = Kind::kOnly;
  int peer = -1;  // the server holding the other replica
  // Primary: forwards go to the peer, and pulls wait for its acknowledgements.
  bool backup_live = false;
  int64_t acked = kNoVersion;  // the backup's version after the last acknowledged forward
  int outstanding = 0;         // forwards not acknowledged yet
  // outstanding > 0: the backup is dropped if no ack by then.
  Deadline ack_due = Deadline::At(Deadline::Clock::time_point::max());
};

// A message for the server's link to another server (ps/server.h): a forward to a backup.
struct Forward {
  int server = 0;
  OutgoingMessage message;
};

struct SnapshotPart {
  int shard = 0;
  std::vector<ChunkState> chunks;
  std::vector<TableState> tables;
};

using ServerOutput = std::variant<OutgoingMessage, SnapshotPart, Forward>;

class Shard {
 public:
  // `update_clock` (borrowed, may be null): the server's wall-clock time in updates.
  Shard(int index, const JobConfig& config, Mailbox<ServerOutput>* outbox,
        BusyClock* update_clock = nullptr);
  ~Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // Return the chunk's or partition's index (slot) in this shard.
  size_t AddChunk(std::unique_ptr<Chunk> chunk, ReplicaRole role = {});
  size_t AddTable(std::unique_ptr<TableChunk> table, ReplicaRole role = {});
  void Start();
  void Post(ShardTask task) { inbox_.Push(std::move(task)); }
  void Stop();

  const ShardCounters& counters() const { return counters_; }
  // The lowest and highest chunk versions (kNoVersion without chunks), readable from any thread.
  int64_t MinVersion() const;
  int64_t MaxVersion() const;
  // Per slot, one of the two is set: the chunk, or the table partition.
  const std::vector<std::unique_ptr<Chunk>>& chunks() const { return chunks_; }
  const std::vector<std::unique_ptr<TableChunk>>& tables() const { return tables_; }
  bool holds_anything() const { return !chunks_.empty(); }

 private:
  // A pull waiting for its chunk: a pull, or a push with thenPull whose gradient was handled
  // already (its outcome rides on the pull's reply).
  struct Waiter {
    IncomingMessage request;
    int64_t push_staleness = 0;  // a push's: its staleness, or -1 when dropped
    std::string push_refusal{};  // a push's: why its gradient was refused; empty: taken
    Tensor pull_ids{};           // a table's pull: the ids whose rows it wants
  };
  // What a request asks to pull: a pull's version and clock, or a push's thenPull ones.
  struct PullAsk {
    int64_t version = 0, clock = 0;
    bool exact = false;
  };
  static PullAsk AskOf(const IncomingMessage& request);
  void Loop();
  void Handle(size_t chunk, IncomingMessage msg);
  // An init or a push of `chunk`; whether the chunk may have changed (pulls to answer).
  bool HandleInit(size_t chunk, IncomingMessage msg, bool forward);
  bool HandlePush(size_t chunk, IncomingMessage msg, bool forward);
  // Answers the pulls waiting on slot `index` that it can serve now.
  void AnswerReadyPulls(size_t index);
  const ChunkSpec& SpecOf(size_t index) const;
  int64_t VersionOf(size_t index) const;
  // Logs a gradient refused as non-finite, once per worker (the stats count every one).
  void NoteRefusal(const IncomingMessage& request, const std::string& why);
  // Answers a push whose gradient the chunk refused as non-finite: an error reply saying why.
  void RefuseNonFinite(const IncomingMessage& request, const std::string& why);
  // Queues a pull (or a push's thenPull) until its chunk or table partition can serve it, in
  // `waiting` (its list); answered by AnswerReadyPulls. Too many waiting on one: an error reply.
  void Wait(std::vector<Waiter>& waiting, Waiter waiter);
  void ReplyPull(size_t chunk, const Waiter& waiter);
  bool PullReady(size_t chunk, const IncomingMessage& request) const;
  // Replication (see above).
  void HandleReplicate(size_t index, const IncomingMessage& msg);
  // What a backup does with its primary's forward of a chunk's (ReplayChunk) or a partition's
  // (HandleTableReplicate) state, step or push; `*status` says whether it could.
  void ReplayChunk(size_t chunk, const IncomingMessage& msg, Status* status);
  void Forward(size_t chunk, proto::ReplicaOp op, const IncomingMessage* request);
  void ForwardStep(size_t chunk, int64_t step, const Tensor& sum, int k);
  void Send(size_t chunk, OutgoingMessage forward);
  void Promote(size_t chunk, bool peer_joined);
  // Table partitions (ps/shard_tables.cc).
  void HandleTable(size_t table, IncomingMessage msg);
  void HandleTablePush(size_t table, IncomingMessage msg, bool forward);
  // Answers a pull of rows (or a push's thenPull) now, or queues it until the partition can.
  void AnswerOrWait(size_t table, Waiter waiter);
  bool RowsReady(size_t table, const IncomingMessage& request) const;
  void ReplyRows(size_t table, const Waiter& waiter);
  void HandleTableReplicate(size_t table, const IncomingMessage& msg, Status* status);
  void ForwardTableStep(size_t table, int64_t step, const Tensor& ids, const Tensor& sums, int k);
  void Acknowledged(size_t chunk, int64_t version);
  void DropSilentBackups();
  Deadline NextWake() const;

  const int index_;
  const JobConfig& config_;
  Mailbox<ServerOutput>* outbox_;
  Mailbox<ShardTask> inbox_;
  std::vector<std::unique_ptr<Chunk>> chunks_;        // per slot: null for a table partition's
  std::vector<std::vector<Waiter>> waiters_;          // per slot
  std::vector<ReplicaRole> roles_;                    // per slot
  std::unique_ptr<std::atomic<int64_t>[]> versions_;  // per slot, mirrored for readers
  std::vector<std::unique_ptr<TableChunk>> tables_;   // per slot: null for a chunk's
  ShardCounters counters_;
  // What a backup replays: kept apart, so that a server's statistics count the updates it
  // applied as a primary, and a job's sum over its servers counts each update once.
  ShardCounters replica_counters_;
  std::set<uint32_t> nonfinite_logged_;   // workers whose non-finite gradient was logged
  std::set<int> dropped_backups_logged_;  // peers whose silence was logged
  std::thread thread_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SHARD_H_
