// ShardSet: a server's shards and the home of every holder on them. It places the holders of
// the replica groups this server holds (one per chunk or table partition, the kind's own: a
// Chunk or a TableChunk), spreading them over the shards in turn, and finds a holder's shard by
// (variable, chunk) for the server's routing, restores and promotions.
//
// Contract: Place() and Restore() only before Start(); Post() from the server's I/O thread. The
// shards' own contract is ps/server/shard.h. Stop() joins the shards' threads; after it the
// holders may be read (the final checkpoint, the rows held).
#ifndef TOWERPS_PS_SERVER_SHARD_SET_H_
#define TOWERPS_PS_SERVER_SHARD_SET_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/mailbox.h"
#include "job/job_config.h"
#include "job/placement.h"
#include "job/variable.h"
#include "ps/server/busy_clock.h"
#include "ps/server/holder_state.h"
#include "ps/server/row_disk.h"
#include "ps/server/server_stats.h"
#include "ps/server/shard.h"

namespace towerps::ps {

class ShardSet {
 public:
  // `threads` shards of `job`, their output to `outbox`, their updates' time on `clock` (all
  // borrowed, outliving the set).
  ShardSet(int threads, const JobConfig& job, Mailbox<ServerOutput>* outbox, BusyClock* clock);
  ~ShardSet() { Stop(); }
  ShardSet(const ShardSet&) = delete;
  ShardSet& operator=(const ShardSet&) = delete;

  // Opens the disk tier in `dir` (ServerOptions::TierDir) when a table of `job` keeps rows on
  // disk; before Place, at the server's start. `from`: the tier checkpoint it starts with
  // (ps/server/tier_checkpoint.h), or empty. Errors: RowDisk::Open's, naming the directory.
  Status OpenDisk(const std::string& dir, const JobConfig& job, const std::string& from = "");
  const RowDisk* disk() const { return disk_.get(); }
  // Places a holder for every piece of `placement` in one of `groups`, with the role
  // `role_for(group)` gives it; its values in memory from `allocate`.
  void Place(const ChunkPlacement& placement, const std::vector<VariableSpec>& variables,
             const std::vector<int>& groups, const JobConfig& job, const TensorAllocator& allocate,
             const std::function<ReplicaRole(int group)>& role_for);
  size_t holders() const { return homes_.size(); }
  // Loads a checkpoint's state into the holder of (variable, chunk), which then tracks its
  // changes for the next delta when `track_changes` (Holder::TrackChanges); kFailedPrecondition
  // when this set holds no such piece of that kind.
  Status Restore(const HolderState& state, uint32_t variable_id, uint32_t chunk_id,
                 bool track_changes);

  // Starts every shard: each on a thread of its own, or a single one without replicas on the
  // caller's thread (the I/O thread's; Shard::Start). Stop() stops them and may be called again.
  void Start();
  void Stop();
  // Call whenever the thread that posts (the I/O thread) is about to wait: a shard that runs on
  // it sends what its tasks produced (Shard::Idle).
  void Idle();
  bool started() const { return started_; }
  bool Holds(uint32_t variable_id, uint32_t chunk_id) const {
    return homes_.count({variable_id, chunk_id}) != 0;
  }
  // Posts `task` to the shard of (variable, chunk), for its holder; dropped when none is here.
  void Post(uint32_t variable_id, uint32_t chunk_id, ShardTask task);
  // Posts `kind` for every holder of a group `shared(group)` says; their groups, in order.
  std::vector<int> PostToGroups(const std::function<bool(int group)>& shared, ShardTask::Kind kind);

  // Worker `rank` is done after `last_step` steps: every shard answers the pulls that now can
  // never be served (Shard::kWorkerFinished).
  void WorkerFinished(int rank, int64_t last_step);

  // The shards' counters summed into `r`, with the lowest and highest holder versions, and each
  // table's (named from `variables`) in r->tables, summed into the table_* fields.
  void AddStats(ServerStatsReport* r, const std::vector<VariableSpec>& variables) const;
  // Each table's counters over its partitions here, named from `variables`, in their order.
  std::vector<TableStats> TableStatsOf(const std::vector<VariableSpec>& variables) const;
  // At the end: each table's stats line and, with `partitions` (--log-device-placement), the
  // rows each table partition holds.
  void LogTables(const std::vector<VariableSpec>& variables, bool partitions) const;
  const std::vector<std::unique_ptr<Shard>>& shards() const { return shards_; }

 private:
  struct Home {
    int shard;
    size_t index;  // the holder's slot in its shard
    int group;     // its replica group
  };
  std::unique_ptr<RowDisk> disk_;  // outlives the holders that use it
  std::vector<std::unique_ptr<Shard>> shards_;
  std::map<std::pair<uint32_t, uint32_t>, Home> homes_;  // (variable, chunk) -> home
  bool started_ = false;
  // One shard and no replicas: it runs on the thread that posts (Start).
  const bool on_caller_thread_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SHARD_SET_H_
