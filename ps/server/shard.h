// Shard: the owner of a set of holders (ps/server/holder.h: dense variables' chunks
// and tables' partitions) and serves their init, push and pull requests, so that each is touched by
// one thread only and needs no lock. Each holder has a slot: its waiting pulls, version and
// replica role. One set of handlers serves every kind; what differs by kind (a request's payload,
// a reply's values, a replicated state) is the holder's.
//
// The server's I/O thread posts requests with Post(). The shard runs them on a thread of its own,
// or, when it is the server's only one and no chunk is replicated, on the I/O thread itself, at
// once (no thread switch a request). It answers through the server's outbox (replies to send,
// snapshots for checkpoints), holding its outputs until it would wait: its thread's inbox is
// empty, or the I/O thread calls Idle(). A pull that cannot be answered yet (the
// chunk is below the asked version, not initialised, or SSP holds it back) waits inside the shard
// and is answered by the update that makes it ready: no polling.
//
// Replication (--ps-replicas 2, ps/server/replica_state.h). Each chunk has a ReplicaRole. A primary
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
// that it has been replaced (ps/server/server.h).
//
// Contract: Add() only before Start(). Start(), Post(), Idle() and Stop() come from one thread,
// the server's I/O thread; Stop() joins the shard's own thread, if it has one. After Stop(),
// holders() may be read by the caller.
#ifndef TOWERPS_PS_SERVER_SHARD_H_
#define TOWERPS_PS_SERVER_SHARD_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "common/mailbox.h"
#include "common/message.h"
#include "job/version.h"
#include "ps/server/finished_workers.h"
#include "ps/server/holder.h"
#include "ps/server/server_stats.h"

namespace towerps::ps {

inline constexpr std::chrono::milliseconds kBackupAckTimeout{2000};

struct ShardTask {
  enum class Kind {
    kRequest,     // message: init, push, pull or replicate for `chunk`
    kSnapshot,    // every chunk's state, for a checkpoint
    kPromote,     // `chunk`'s other replica is gone: become its primary
    kPeerJoined,  // `chunk`'s other replica restarted: become (or stay) primary, send it the state
    kAck,         // the backup of `chunk` applied forwards up to `version`
    // `worker` is done after `version` steps: in sync, with every worker's gradient in each
    // step, a pull past that can never be served and is answered with an error naming it.
    kWorkerFinished,
    kStop
  } kind = Kind::kRequest;
  size_t chunk = 0;                        // the chunk's or table partition's index (slot)
  std::optional<IncomingMessage> message;  // kRequest
  int64_t version = 0;                     // kAck, kWorkerFinished
  int worker = -1;                         // kWorkerFinished
  Holder::CheckpointSave save;             // kSnapshot: whole or changes (checkpoint_chain.h)
  // kSnapshot: called once the holders are saved (TierSnapshot: ps/server/tier_checkpoint.h).
  std::function<void()> meet;
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

// A message for the server's link to another server (ps/server/server.h): a forward to a backup.
struct Forward {
  int server = 0;
  OutgoingMessage message;
};

struct SnapshotPart {
  int shard = 0;
  std::vector<HolderState> states;
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

  // Returns the holder's index (slot) in this shard.
  size_t Add(std::unique_ptr<Holder> holder, ReplicaRole role = {});
  // own_thread: the shard runs its tasks on a thread of its own, and Post() only queues them.
  // Otherwise it runs each on the caller's thread at once: Post, Idle and Stop must then come
  // from that one thread.
  void Start(bool own_thread = true);
  void Post(ShardTask task);
  // Without a thread of its own: sends what the tasks so far produced (their replies are held
  // until then, as the shard's own thread holds them until its inbox is empty). Call it before
  // the caller waits.
  void Idle();
  void Stop();

  const ShardCounters& counters() const { return counters_; }
  // The lowest and highest chunk versions (kNoVersion without chunks), readable from any thread.
  int64_t MinVersion() const;
  int64_t MaxVersion() const;
  const std::vector<std::unique_ptr<Holder>>& holders() const { return holders_; }
  bool holds_anything() const { return !holders_.empty(); }

 private:
  // A pull waiting for its holder: a pull, or a push with thenPull whose gradient was handled
  // already (its outcome rides on the pull's reply).
  struct Waiter {
    IncomingMessage request;
    PullAsk ask;
    int64_t push_staleness = 0;  // a push's: its staleness, or -1 when dropped
    std::string push_refusal{};  // a push's: why its gradient was refused; empty: taken
  };
  void Loop();
  // Runs one task; false for kStop. An exception escaping it ends the process, whichever thread
  // runs it: a task half done may have changed a holder or forwarded to a backup.
  bool Run(ShardTask task) noexcept;
  void Handle(size_t index, IncomingMessage msg);
  // An init or a push; whether the holder may have changed (pulls to answer).
  bool HandleInit(size_t index, IncomingMessage msg, bool forward);
  bool HandlePush(size_t index, IncomingMessage msg, bool forward);
  // Logs a gradient refused as non-finite, once per worker (the stats count every one).
  void NoteRefusal(const IncomingMessage& request, const std::string& why);
  // Answers a push whose gradient the holder refused as non-finite: an error reply saying why.
  void RefuseNonFinite(const IncomingMessage& request, const std::string& why);
  // Answers a pull (or a push's thenPull) now, or queues it until its holder can serve it.
  // Too many waiting on one: an error reply.
  void AnswerOrWait(size_t index, Waiter waiter);
  // Answers the pulls waiting on slot `index` that it can serve now.
  void AnswerReadyPulls(size_t index);
  bool PullReady(size_t index, const PullAsk& ask) const;
  // A finished worker: fails every waiting pull that now never can be served.
  void WorkerFinished(int worker, int64_t last_step);
  void Reply(size_t index, const Waiter& waiter);
  // Replication (see above).
  void HandleReplicate(size_t index, const IncomingMessage& msg);
  // What a backup does with its primary's forward of a holder's state, step, init or push.
  Status Replay(size_t index, const IncomingMessage& msg);
  void Forward(size_t index, proto::ReplicaOp op, const std::vector<Tensor>& tensors = {},
               const IncomingMessage* request = nullptr);
  void ForwardStep(size_t index, int64_t step, const std::vector<Tensor>& sums, int k);
  void Send(size_t index, OutgoingMessage forward);
  void Promote(size_t index, bool peer_joined);
  void Acknowledged(size_t index, int64_t version);
  void DropSilentBackups();
  Deadline NextWake() const;
  // "variable 3 chunk 1" or "variable 4 partition 0".
  std::string Where(size_t index) const;

  const int index_;
  const JobConfig& config_;
  HeldPushes<ServerOutput> outbox_;  // the server's, flushed before the shard would wait
  Mailbox<ShardTask> inbox_{/*wake_fd=*/false};
  std::vector<std::unique_ptr<Holder>> holders_;      // per slot
  std::vector<std::vector<Waiter>> waiters_;          // per slot
  std::vector<ReplicaRole> roles_;                    // per slot
  std::unique_ptr<std::atomic<int64_t>[]> versions_;  // per slot, mirrored for readers
  ShardCounters counters_;
  // What a backup replays: kept apart, so that a server's statistics count the updates it
  // applied as a primary, and a job's sum over its servers counts each update once.
  ShardCounters replica_counters_;
  std::set<uint32_t> nonfinite_logged_;   // workers whose non-finite gradient was logged
  std::set<int> dropped_backups_logged_;  // peers whose silence was logged
  FinishedWorkers finished_;
  bool started_ = false;
  bool own_thread_ = false;
  std::thread thread_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SHARD_H_
