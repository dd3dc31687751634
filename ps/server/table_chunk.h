// TableChunk: one partition of an embedding table (VariableKind::kTable) held by a server: the
// rows whose id hashes to it (job/placement.h), their optimizer state and update counts, the
// partition's version and its update rule.
//
// Rows are created when first updated, with values drawn from (seed, table name, id)
// (job/initial_rows.h): a pull of
// an id the partition does not hold reads those initial values without storing anything, so a
// row's bits never depend on which worker touched it first or when, and memory grows with the
// rows trained, not with the ids looked up (evaluation) nor with the table's bound.
//
// Updates go through the job's update rule exactly as a dense chunk's do (ps/server/update_rule.h):
// a worker's contribution is (ids, one gradient row per id, each row's update count when pulled),
// and the partition is the rule's UpdateTarget. Applying an update sums the contributions' rows
// id by id in worker-rank order (an id a worker did not send adds nothing), scales the sum by
// 1 / divisor, and runs the per-row optimizer (ps/server/row_optimizer.h) on each row touched. So
// in sync mode every worker pushes to every partition each step, with no ids where it touched none,
// and a row's update at step t is the rank-ordered sum of the workers' gradients divided by the
// number of workers; versions count steps as a chunk's do, and SSP's bound, softsync's groups and
// backup workers mean the same for a partition as for a chunk.
//
// Row staleness: each contribution carries every row's update count as of the pull its
// gradient was computed from; when applied, the row's updates since then are counted in
// ShardCounters::row_staleness. It is what distinguishes embeddings under stale training: a
// popular row is updated by every worker, a rare one by almost nobody.
//
// Restarted workers (sync): the partition keeps, for the rows its last update changed or evicted,
// their values before it (ps/server/previous_rows.h), so a worker that died during step t can
// pull exactly version t after the partition moved to t + 1 (Lookup).
//
// The table's policy (job/table_policy.h, ps/server/row_policy.h) decides which ids get a row
// and which rows are evicted after each update; an id without a row reads its initial values,
// and the gradients of ids not admitted are dropped (counted once per id and update). The primary
// and its backup decide the same, from the same ids in the same order. With storage=rocksdb the
// rows beyond the partition's memory budget live on disk (ps/server/table_rows.h): where a row
// lives never changes its bits. A snapshot (checkpoint, replica) holds every row, from both.
//
// Contract: owned and used by exactly one server thread; not thread-safe. Requests are validated
// here (CheckIds, Push): a malformed one is an error naming the table, never a crash, and
// changes nothing.
#ifndef TOWERPS_PS_SERVER_TABLE_CHUNK_H_
#define TOWERPS_PS_SERVER_TABLE_CHUNK_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "job/initial_rows.h"
#include "job/job_config.h"
#include "job/placement.h"
#include "job/variable.h"
#include "job/version.h"
#include "ps/server/holder.h"
#include "ps/server/previous_rows.h"
#include "ps/server/row_disk.h"
#include "ps/server/row_gradients.h"
#include "ps/server/row_optimizer.h"
#include "ps/server/row_policy.h"
#include "ps/server/server_stats.h"
#include "ps/server/table_rows.h"
#include "ps/server/update_rule.h"
#include "towerps/result.h"

namespace towerps::ps {

class TableChunk final : public Holder, private UpdateTarget {
 public:
  // `variable` is the table's declaration (name, bound, dim, init scale); `allocate` is where
  // pulled rows are gathered (the server's shared-memory arena, so that a co-located worker
  // reads them in place); null: the heap. `disk`: the server's disk tier, which a table with
  // storage=rocksdb needs (ps/server/table_rows.h); null when no table uses one.
  TableChunk(const ChunkSpec& spec, const VariableSpec& variable, const JobConfig& config,
             TensorAllocator allocate = nullptr, RowDisk* disk = nullptr);
  TableChunk(const TableChunk&) = delete;
  TableChunk& operator=(const TableChunk&) = delete;

  const ChunkSpec& spec() const override { return spec_; }
  int64_t version() const override { return version_; }
  int64_t rows_held() const override { return rows_.size(); }
  int64_t rows_on_disk() const { return rows_.on_disk(); }
  size_t bytes_held() const override { return rows_.bytes(); }
  // What the table's policy has done here (admitted, dropped, evicted: since this process
  // started), and the ids pending admission.
  const RowPolicyCounts& policy_counts() const { return policy_.counts(); }
  const TableCounters* table_counters() const override { return &counters_; }
  int64_t pending_admission() const { return policy_.pending(); }
  size_t step_tensors() const override { return 2; }  // a step's ids and summed rows
  int64_t worker_clock(int worker) const override { return rule_->worker_clock(worker); }
  bool PullReady(int64_t min_version, int64_t clock) const override;
  // A table takes no initial value: its rows are drawn when first updated (an error).
  Result<bool> Init(const IncomingMessage& request) override;

  // Checks the ids of a request: a uint64 tensor of rank 1, every id below the table's bound and
  // of this partition. `sorted`: strictly increasing too (a push's). Errors name the table.
  Status CheckIds(const Tensor& ids, bool sorted) const;
  // The rows of `ids` (checked with CheckIds) at `version`: the current one, or in sync mode the
  // one before (for a restarted worker's exact pull); kFailedPrecondition for any other. Rows
  // are [ids, dim] floats from the allocator; `updates` (uint32 [ids]) counts each row's updates
  // so far, 0 for a row not held (read at its initial values), and 0 for a row the last update
  // evicted when read one version back (its values are exact; the count only feeds row
  // staleness).
  Status Lookup(const Tensor& ids, int64_t version, Tensor* rows, Tensor* updates) const;
  // Every row held, at the current version, in increasing order of id: their ids (uint64 [n]),
  // values (float32 [n, dim], from the allocator) and update counts (uint32 [n]).
  void Dump(Tensor* ids, Tensor* rows, Tensor* updates) const;
  // A pull request's ids (table_requests.h); its reply: Lookup's rows and counts, or Dump's.
  Status ReadPull(const IncomingMessage& request, PullAsk* ask) const override;
  Status AddPullValues(const PullAsk& ask, OutgoingMessage* reply) const override;

  // Checks one worker's push (rank, ids, gradient rows [ids, dim] float32, pulled update counts
  // [ids] uint32) and hands it to the mode's rule; errors as Chunk::Push's, and for a bad
  // request, naming the table. A non-finite gradient is kRejected.
  Result<PushOutcome> Push(Contribution c, ShardCounters* counters, bool replace = false) override;
  // A push request's ids, rows and counts (table_requests.h), and with thenPull the ids next.
  Result<Contribution> ReadPush(const IncomingMessage& request, int worker,
                                PullAsk* next) const override;
  void Prefetch(const PullAsk& next) override {
    if (rows_.tiered() && next.ids.defined() && next.ids.num_elements() > 0) {
      rows_.Prefetch(next.ids.u64(), static_cast<size_t>(next.ids.num_elements()));
    }
  }

  // Sync, replicated (--ps-replicas 2): called with (step, {the ids its update changes, their
  // summed gradient rows}, how many gradients were summed) before the update is applied from
  // those sums; the tensors are never written after. Null: no sums are formed.
  void set_step_hook(StepHook hook) override { step_hook_ = std::move(hook); }
  // Sync backup: applies step `step` (= version) from its primary's sums of k gradients (k = 0:
  // the step passes with no update), as the primary applied them. Errors: another version, or
  // sums that do not fit.
  Status ApplyStep(int64_t step, const Tensor& ids, const Tensor& sums, int k,
                   ShardCounters* counters);
  Status ApplyStep(int64_t step, const std::vector<Tensor>& sums, int k,
                   ShardCounters* counters) override;

  // A deep copy; `replica`: with the previous version's rows and the pending contributions too,
  // so that a backup restored from it continues exactly as this partition does.
  // `changes`: only the rows changed since change tracking started (SaveChanges). `on_tier`:
  // only the rows in memory, when tiered, the rest being in the tier's checkpoint
  // (TableRows::Save).
  TableState Snapshot(bool replica = false, bool changes = false, bool on_tier = false) const;
  HolderState Save(bool replica) const override { return Snapshot(replica); }
  HolderState SaveCheckpoint(CheckpointSave how) override {
    if (how.tier) rows_.EraseEvictedCopies();
    TableState s = Snapshot(false, how.changes && rows_.tracking(), how.tier);
    rows_.TrackChanges(how.track);
    return s;
  }
  void TrackChanges() override { rows_.TrackChanges(true); }
  // Replaces all state with a checkpointed or replicated one. kCorruption when it does not fit
  // this partition (dim, slots, sizes, ids outside it or repeated, a pending push's shapes).
  Status Restore(const TableState& state);
  Status Load(const HolderState& state) override;

 private:
  // UpdateTarget: what the rule sees of this partition.
  float ScheduledRate() const override;
  std::string Describe() const override;
  void Apply(const FormedUpdate& update, ShardCounters& counters) override;

  // An update's phases (Apply, ApplyStep): the previous version kept (sync) and the version
  // moved; the update's rows by id into pushed_ (RowGradients).
  void BeginUpdate();
  // Each row g of group_rows_ updated at rate lr with scale times its gradient: row g of `sums`
  // (a step's sums, [rows, dim]), or when null pushed_'s sum of it. With `count_staleness`, each
  // pushed row's staleness goes to `counters` too.
  void UpdateRows(const float* sums, float scale, float lr, bool count_staleness,
                  ShardCounters& counters);
  void FinishUpdate(ShardCounters& counters);

  // The row of each of pushed_'s ids (group_rows_[g] for pushed_.id(g)), created with its
  // initial values where new and admitted (-1: not admitted).
  void FindOrAddRows();
  // The policy's evictions after an update, their rows' values kept for a restarted worker;
  // then the partition's counters stored (rows held, the policy's and the tier's counts).
  void Evict();
  void InitialValues(uint64_t id, float* out) const;
  Status CheckShape(const Contribution& c) const;
  // A replicated state's previous rows and pending contributions, against this partition.
  Status CheckReplicaExtras(const TableState& s) const;

  const ChunkSpec spec_;
  const std::string name_;
  const InitialRows initial_;
  const JobConfig config_;
  const TensorAllocator allocate_;
  const std::unique_ptr<UpdateRule> rule_;
  const int64_t dim_;
  const RowOptimizer optimizer_;
  const int slots_;
  int64_t version_ = 0;
  int64_t updates_ = 0;
  RowPolicy policy_;
  TableRows rows_;
  PreviousRows previous_;  // sync
  TableCounters counters_;
  // Scratch of Apply: the update's rows by id, their rows here, and the sums of a batch of rows
  // (UpdateRows).
  RowGradients pushed_;
  std::vector<int64_t> group_rows_;
  std::vector<float> sum_;
  StepHook step_hook_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_TABLE_CHUNK_H_
