// Checkpointer: when a server writes its checkpoint file (ps/server/checkpoint.h), and how its
// shards' snapshots become one.
//
// Periodic: once the lowest version of the server's holders is `every` versions past the last
// checkpoint (or past the last attempt, after a failed one), every shard is asked for a
// snapshot (ShardTask::kSnapshot); when all have answered (Add), the file is written. A failed
// write (a full disk) keeps the previous file, is logged, and serving goes on. Final: at
// shutdown, from the stopped shards' holders directly; its failure is the caller's to report,
// since the updates since the last checkpoint would be lost.
//
// Contract: owned by the server's I/O thread; not thread-safe. Shards are borrowed per call.
#ifndef TOWERPS_PS_SERVER_CHECKPOINTER_H_
#define TOWERPS_PS_SERVER_CHECKPOINTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "job/version.h"
#include "ps/server/checkpoint.h"
#include "ps/server/shard.h"
#include "towerps/result.h"

namespace towerps::ps {

class Checkpointer {
 public:
  // `dir` empty: no checkpoints. `every` <= 0: only the final one.
  Checkpointer(std::string dir, int server_rank, int64_t every)
      : dir_(std::move(dir)), rank_(server_rank), every_(every) {}

  bool enabled() const { return !dir_.empty(); }
  // What every file records of the job, the model and this server (set once the model is known).
  void set_meta(CheckpointMeta meta) { meta_ = std::move(meta); }
  // A checkpoint restored at start holds `version`: the next periodic one counts from it.
  void Restored(int64_t version) { last_version_ = version; }

  // One turn of the server's loop: writes the file once every shard's snapshot has come, or
  // asks the shards for snapshots when one is due.
  void Tick(const std::vector<std::unique_ptr<Shard>>& shards);
  // A shard's snapshot, asked for by Tick.
  void Add(SnapshotPart part) { parts_.push_back(std::move(part)); }
  // The final checkpoint, from stopped shards; kIoError naming the file when it fails.
  Status Final(const std::vector<std::unique_ptr<Shard>>& shards);

  uint64_t written() const { return written_; }
  // The version of the last checkpoint written or restored; kNoVersion: none.
  int64_t last_version() const { return last_version_; }

 private:
  Status Write(std::vector<SnapshotPart> parts);

  const std::string dir_;
  const int rank_;
  const int64_t every_;
  CheckpointMeta meta_;
  int64_t last_version_ = kNoVersion;
  int64_t attempt_version_ = kNoVersion;  // when the last periodic one was started
  bool in_flight_ = false;                // snapshots asked for and not all in
  std::vector<SnapshotPart> parts_;
  uint64_t written_ = 0;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_CHECKPOINTER_H_
