// Holder: one piece of one variable that a server's shard serves, as the shard sees it. The
// kind of variable is this object, as the mode is the update rule (ps/server/update_rule.h): a
// dense variable's chunk (ps/server/chunk.h) and an embedding table's partition
// (ps/server/table_chunk.h) are holders, and the shard (ps/server/shard.h) keeps one list of them
// and one set of handlers. A new kind (a table with a disk tier, say) is a new Holder, not a new
// half of every handler.
//
// A holder reads the payload of the requests for it (a push's gradient, a pull's selection),
// checks it against itself, hands a push to its rule, and writes a pull's reply values. What is
// the same for every kind stays in the shard: replica roles, forwards and acknowledgements,
// waiting pulls, the reply's header, refusals and counters.
//
// Wire layout per kind (variableId and chunkId name the holder; common/proto/towerps.capnp):
//   chunk      init: its values. push: its gradient. pull: nothing. pullReply: the values.
//   partition  init: refused. push: ids (uint64, unique and increasing), gradient rows
//              (float32 [ids, dim]) and each row's update count when pulled (uint32), and with
//              thenPull the ids to pull next. pull: the ids (uint64), or with everyRow none
//              read. pullReply: rows (float32 [ids, dim]) and update counts (uint32), and for
//              everyRow the rows' ids (increasing).
// A forwarded push carries the push's gradient tensors as they came (Contribution::Tensors); a
// sync step's forward carries the sums StepHook hands out.
//
// Contract: owned and used by exactly one shard thread; not thread-safe. A request that does
// not fit is an error naming the holder, and changes nothing.
#ifndef TOWERPS_PS_SERVER_HOLDER_H_
#define TOWERPS_PS_SERVER_HOLDER_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "common/message.h"
#include "common/tensor.h"
#include "job/placement.h"
#include "ps/server/holder_state.h"
#include "ps/server/server_stats.h"
#include "ps/server/update_rule.h"
#include "towerps/result.h"

namespace towerps::ps {

// What a pull (or a push's thenPull) asks of a holder.
struct PullAsk {
  int64_t version = 0;  // at least this version; exactly it when `exact`
  int64_t clock = 0;    // the asking worker's iteration (SSP's bound)
  bool exact = false;   // a restarted sync worker's pull of the step it recomputes
  bool every_row = false;
  Tensor ids{};  // a partition's: the rows wanted (read by ReadPull or ReadPush)
};

class Holder {
 public:
  virtual ~Holder() = default;

  virtual const ChunkSpec& spec() const = 0;
  // kNoVersion until it holds values (a chunk before its init).
  virtual int64_t version() const = 0;
  bool initialized() const { return version() != kNoVersion; }
  // The next iteration of `worker` this holder expects.
  virtual int64_t worker_clock(int worker) const = 0;
  // Whether a pull asking for (min_version, clock) can be answered now.
  virtual bool PullReady(int64_t min_version, int64_t clock) const = 0;

  // An init request: sets the initial values; only the first has an effect (returns whether
  // this one did).
  virtual Result<bool> Init(const IncomingMessage& request) = 0;
  // A pull's selection, into `ask` (a partition's ids; a chunk reads nothing).
  virtual Status ReadPull(const IncomingMessage& request, PullAsk* ask) const = 0;
  // A push's gradient as `worker`'s contribution (the version and clock from its header); with
  // thenPull, the selection pulled after it into `next`.
  virtual Result<Contribution> ReadPush(const IncomingMessage& request, int worker,
                                        PullAsk* next) const = 0;
  // A hint, before the push is handed on: `next` (its thenPull) will be asked for once the push
  // is applied, so a holder may start reading it (a table's rows on disk: TableRows::Prefetch).
  virtual void Prefetch(const PullAsk& /*next*/) {}
  // Hands a contribution read by ReadPush to the mode's rule (see Chunk::Push).
  virtual Result<PushOutcome> Push(Contribution c, ShardCounters* counters, bool replace) = 0;
  // Sets `reply`'s version and adds the values `ask` selects: the current ones, or for an exact
  // ask that version's (kFailedPrecondition when no longer held).
  virtual Status AddPullValues(const PullAsk& ask, OutgoingMessage* reply) const = 0;

  // Replication (--ps-replicas 2, ps/server/shard.h). Sync: `hook` is called with each step's
  // summed gradients (step_tensors() of them, never written after), before the update is
  // applied from them; a backup applies them with ApplyStep (k = 0: the step passes with no
  // update, and no tensors come).
  using StepHook = std::function<void(int64_t step, const std::vector<Tensor>& sums, int k)>;
  virtual void set_step_hook(StepHook hook) = 0;
  virtual size_t step_tensors() const = 0;
  virtual Status ApplyStep(int64_t step, const std::vector<Tensor>& sums, int k,
                           ShardCounters* counters) = 0;

  // The whole state, for a checkpoint or (`replica`: with the previous version and the pending
  // gradients too) a joining backup (ps/server/replica_state.h carries it); and its restore,
  // kCorruption when it does not fit this holder.
  virtual HolderState Save(bool replica) const = 0;
  virtual Status Load(const HolderState& state) = 0;
  // A checkpoint's state (ps/server/checkpoint_chain.h): whole or, with `changes`, only what
  // changed since the previous checkpoint's save where that is known (a table partition tracking
  // its changes: TableState::changes_only); with `track`, changes are tracked from here on for
  // the next one, else not at all. TrackChanges: the holder holds what the last checkpoint does
  // (it was just restored from it), so its changes are tracked from here.
  struct CheckpointSave {
    bool changes = false;
    bool track = false;
    // A full checkpoint that keeps the disk tier's own checkpoint beside the file
    // (ps/server/tier_checkpoint.h): a table partition with a tier saves its rows in memory only.
    bool tier = false;
  };
  virtual HolderState SaveCheckpoint(CheckpointSave /*how*/) { return Save(false); }
  virtual void TrackChanges() {}

  // What this holder keeps in memory beyond its values: table rows held (0 for a chunk).
  virtual int64_t rows_held() const { return 0; }
  // A table partition's counters, which the server reads from its I/O thread; null for a chunk.
  virtual const TableCounters* table_counters() const { return nullptr; }
  virtual size_t bytes_held() const { return 0; }
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_HOLDER_H_
