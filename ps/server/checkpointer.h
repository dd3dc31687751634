// Checkpointer: when a server writes its checkpoint file (ps/server/checkpoint.h), and how its
// shards' snapshots become one.
//
// Incremental (full_every K > 1): every K-th checkpoint is full, starting a new chain, and the
// ones between are deltas of the table rows changed since the one before
// (ps/server/checkpoint_chain.h); the holders track their changes meanwhile. After a failed
// write, or before any full one, the next is full. Once a full checkpoint is in place the old
// chain's deltas are removed; a chain's number is unique (the time it started, at least the
// last one's plus 1), so a delta left behind by a crash is never applied to a newer chain.
//
// Periodic: once the lowest version of the server's holders is `every` versions past the last
// checkpoint (or past the last attempt, after a failed one), every shard is asked for a
// snapshot (ShardTask::kSnapshot); when all have answered (Add), the file is written. A failed
// write (a full disk) keeps the previous file, is logged, and serving goes on. Final: at
// shutdown, from the stopped shards' holders directly; its failure is the caller's to report,
// since the updates since the last checkpoint would be lost.
//
// With a disk tier (set_disk), a full checkpoint keeps the tier as RocksDB's own checkpoint
// beside the file (ps/server/tier_checkpoint.h): the shards meet once they have saved their
// holders, the last one takes the tier's checkpoint, and only then is the file written. A tier
// checkpoint that fails fails the checkpoint; once a full one is in place, the older chains'
// tier checkpoints are removed.
//
// Contract: owned by the server's I/O thread; not thread-safe. Shards are borrowed per call.
#ifndef TOWERPS_PS_SERVER_CHECKPOINTER_H_
#define TOWERPS_PS_SERVER_CHECKPOINTER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "job/version.h"
#include "ps/server/checkpoint_chain.h"
#include "ps/server/shard.h"
#include "ps/server/tier_checkpoint.h"
#include "towerps/result.h"

namespace towerps::ps {

class Checkpointer {
 public:
  // `dir` empty: no checkpoints. `every` <= 0: only the final one. `full_every`: K, >= 1.
  Checkpointer(std::string dir, int server_rank, int64_t every, int64_t full_every = 1)
      : dir_(std::move(dir)), rank_(server_rank), every_(every), full_every_(full_every) {}

  bool enabled() const { return !dir_.empty(); }
  // At start: creates the directory if need be, and loads this server's chain there
  // (ps/server/checkpoint_chain.h); nullopt when disabled or there is none.
  Result<std::optional<Checkpoint>> Find() const;
  // What every file records of the job, the model and this server (set once the model is known).
  void set_meta(CheckpointMeta meta) { meta_ = std::move(meta); }
  // The server's disk tier, if any (it outlives the checkpointer's use of it).
  void set_disk(const RowDisk* disk) { disk_ = disk; }
  // A checkpoint restored at start (`meta`: its chain's) holds `version`: the next periodic one
  // counts from it, and the next delta extends that chain.
  void Restored(int64_t version, const CheckpointMeta& meta) {
    last_version_ = version;
    chain_ = meta.chain;
    deltas_ = meta.delta;
    need_full_ = false;
  }
  // Whether holders track their changes: restored ones start at once (ShardSet::Restore).
  bool tracks_changes() const { return full_every_ > 1; }

  // One turn of the server's loop: writes the file once every shard's snapshot has come, or
  // asks the shards for snapshots when one is due.
  void Tick(const std::vector<std::unique_ptr<Shard>>& shards);
  // A shard's snapshot, asked for by Tick.
  void Add(SnapshotPart part) { parts_.push_back(std::move(part)); }
  // The final checkpoint, from stopped shards; kIoError naming the file when it fails.
  Status Final(const std::vector<std::unique_ptr<Shard>>& shards);

  uint64_t written() const { return written_; }
  uint64_t deltas_written() const { return deltas_written_; }
  // The version of the last checkpoint written or restored; kNoVersion: none.
  int64_t last_version() const { return last_version_; }

 private:
  // What the next checkpoint asks of the holders: changes only, unless it is a full one.
  Holder::CheckpointSave Next() const;
  // A new chain's number: unique, the time it starts, at least the last one's plus 1.
  uint64_t NewChain() const;
  // Writes the file of chain `chain` (a full one when `delta` is false); `tier`: the full one's
  // tier checkpoint was taken with this status.
  Status Write(std::vector<SnapshotPart> parts, bool delta, uint64_t chain,
               const Status& tier = Status::Ok());

  const std::string dir_;
  const int rank_;
  const int64_t every_;
  const int64_t full_every_;
  CheckpointMeta meta_;
  int64_t last_version_ = kNoVersion;
  int64_t attempt_version_ = kNoVersion;  // when the last periodic one was started
  bool in_flight_ = false;                // snapshots asked for and not all in
  bool in_flight_delta_ = false;          // what those snapshots are for
  uint64_t in_flight_chain_ = 0;          // and their chain
  std::shared_ptr<TierSnapshot> in_flight_tier_;
  const RowDisk* disk_ = nullptr;
  std::vector<SnapshotPart> parts_;
  uint64_t written_ = 0, deltas_written_ = 0;
  uint64_t chain_ = 0;     // the chain the files on disk form
  uint32_t deltas_ = 0;    // its deltas
  bool need_full_ = true;  // no chain yet, or the last write failed
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_CHECKPOINTER_H_
