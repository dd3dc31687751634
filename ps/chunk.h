// Chunk: one piece of one variable held by a server, with its optimizer state, its version, and
// the update rule of the job's mode.
//
//  sync   Gradients for step t (= the version they were computed from) wait until
//         EffectiveReplicas() have arrived; they are summed in worker-rank order, averaged, and
//         applied once; the version moves to t+1. A gradient for a step below the version is
//         dropped and counted (its worker was a backup this step).
//  async  Each gradient is applied on arrival; staleness = version - base version, recorded;
//         with staleness_aware_lr the learning rate is divided by max(1, staleness).
//  ssp    As async; in addition a pull for clock c is ready only once every worker has pushed
//         clock c - s - 1 or later (Ho et al. 2013), i.e. no worker is more than s ahead.
//  softsync  Zhang et al. 2016's n-softsync: each update averages the first c = workers / n
//         gradients to arrive, whatever version they were computed from, in worker-rank order;
//         each is recorded with its staleness (version at the update - base version), and with
//         staleness_aware_lr the rate is divided by their mean staleness. A late gradient is
//         never dropped: it joins the next update. Pulls never wait (workers read the latest
//         values, as in async): with n = 1 an update of one gradient per worker is sync's,
//         bit for bit, and n = workers applies each gradient on arrival, exactly as async does.
//         (Pulls cannot wait for a worker's own pending gradient: chunks group arrivals
//         independently, so each could hold a different worker's leftover and all would wait.)
//         Worker clocks here count applied iterations; pending gradients are not checkpointed,
//         so a restored chunk gets them again from the rejoining workers.
//  In async, SSP and softsync a push for an iteration below the worker's clock here is kDuplicate
//  and dropped: a restarted worker redoes the iteration its predecessor left half-pushed, and each
//  (worker, iteration) is applied once per chunk.
//
// Restarted workers (sync): the chunk keeps the values of its previous version, so that a worker
// that died during step t and recomputes it can pull exactly version t even where the chunk has
// already moved on to t + 1 (ValuesAt). In a full sync job chunk versions differ by at most one,
// so one version back is always enough. A repeated push of (worker, step) is accepted: dropped if
// the step is already applied (as a stale push), and checked bit for bit against the held one if
// it is still pending; a different gradient is an error naming the worker.
//
// Replicated sync chunks (a step hook is set, ps/shard.h): CompleteStep first sums the step's
// finite gradients in rank order into one tensor, hands it to the hook (which forwards it to the
// backup), and applies the update from that sum; the backup applies the same sum with ApplyStep.
// The sum is formed exactly as the fused update forms it, so the bits are the same either way.
//
// A gradient holding a NaN or an infinity is refused in every mode (kRejected) and counted: it
// is never applied, so one diverging worker cannot poison the model. It still counts as its
// worker's push, so that nobody waits for it: sync: the step completes with the average of the
// finite gradients, or with no update (the version still advances) when none is finite;
// async/ssp: the version advances with no update, and the worker's clock advances.
//
// Contract: owned and used by exactly one server thread; not thread-safe. values() returns a
// handle that stays valid and unchanged after later updates (copy-on-write: an update whose
// current buffer is still shared, e.g. being sent, writes into another buffer).
#ifndef TOWERPS_PS_CHUNK_H_
#define TOWERPS_PS_CHUNK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "ps/job_config.h"
#include "ps/placement.h"
#include "ps/server_stats.h"
#include "ps/version.h"
#include "towerps/result.h"

namespace towerps::ps {

struct PushOutcome {
  enum class Kind { kApplied, kPending, kDropped, kDuplicate, kRejected } kind = Kind::kPending;
  std::string rejection;  // kRejected: why, naming the worker, variable, chunk and value
  int64_t staleness = 0;  // async/ssp: of this update; sync: 0
  int64_t version = 0;    // the chunk's version after the push
};

// Everything a checkpoint needs to restore a chunk exactly.
struct ChunkState {
  uint32_t variable_id = 0;
  uint32_t chunk_id = 0;
  int64_t version = kNoVersion;
  int64_t updates = 0;
  Tensor values;
  std::vector<Tensor> slots;
  std::vector<int64_t> worker_clocks;
  // Only in a replica's state (Snapshot(true)), for a joining backup; checkpoints leave them
  // out. sync: the previous version's values, and the gradients pending for the current step
  // (worker rank -> gradient; an empty tensor marks a refused one).
  int64_t previous_version = kNoVersion;
  Tensor previous_values;
  std::map<int, Tensor> pending;
};

class Chunk {
 public:
  // `allocate`: where the values and step sums live (the server's shared-memory arena, so that
  // pulls and forwards lend them without a copy); null: the heap.
  Chunk(const ChunkSpec& spec, const JobConfig& config, TensorAllocator allocate = nullptr);
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  const ChunkSpec& spec() const { return spec_; }
  bool initialized() const { return version_ != kNoVersion; }
  int64_t version() const { return version_; }

  // Sets the initial values (copied) and version 0. Only the first call has an effect; returns
  // whether this one did. Fails on a size mismatch.
  Result<bool> Init(const Tensor& values);
  // Replaces all state with a checkpointed or replicated one (same spec; checked by the caller).
  void Restore(const ChunkState& state);
  // A deep copy; `replica`: with the previous version and the pending gradients too, so that a
  // backup restored from it continues exactly as this chunk does.
  ChunkState Snapshot(bool replica = false) const;

  // Applies the mode's rule to one worker's gradient (kept by reference while pending); a
  // non-finite one is kRejected (see above). Errors: not initialised, wrong size, worker rank
  // out of range, a step from the future (sync), or a repeated gradient from one worker for a
  // pending step that differs from the first (sync; an identical one is kDuplicate).
  // `replace` (sync): a repeated gradient for a pending step replaces the held one instead of
  // being compared (a worker that rejoined where bit-for-bit recomputation is impossible).
  Result<PushOutcome> Push(int worker, int64_t base_version, int64_t clock, const Tensor& gradient,
                           ShardCounters* counters, bool replace = false);

  // Sync: called with (step, sum of its k finite gradients, k) before a step's update is applied;
  // the sum is shared, never written after. Null: no sum is formed (the fused update).
  using StepHook = std::function<void(int64_t step, const Tensor& sum, int k)>;
  void set_step_hook(StepHook hook) { step_hook_ = std::move(hook); }
  // Sync backup: applies step `step` (= version) from its primary's sum of k gradients (k = 0:
  // the step passes with no update), as CompleteStep does. Errors: not initialised, another
  // version, a wrong size.
  Status ApplyStep(int64_t step, const Tensor& sum, int k, ShardCounters* counters);

  // How many iterations of `worker` this chunk has applied (or refused): the next one it expects.
  int64_t worker_clock(int worker) const {
    return worker >= 0 && worker < static_cast<int>(worker_clocks_.size())
               ? worker_clocks_[static_cast<size_t>(worker)]
               : 0;
  }
  // Whether a pull asking for (min_version, clock) can be answered now.
  bool PullReady(int64_t min_version, int64_t clock) const;
  const Tensor& values() const { return values_; }
  // The values at exactly `version`: the current ones, or (sync) the previous version's; null
  // when this chunk no longer holds, or does not yet have, that version.
  const Tensor* ValuesAt(int64_t version) const;

 private:
  // Applies the optimizer to the sum of `k` gradients scaled by 1 / `divisor`.
  void Update(const float* const* grads, int k, int divisor, float lr, ShardCounters* counters);
  // Sync: the step's gradients are all in; applies the average of the finite ones.
  void CompleteStep(int64_t step, float lr, ShardCounters* counters);
  // Softsync: c gradients are in; applies the average of the finite ones, in worker order.
  void CompleteSoftsyncUpdate(float lr, ShardCounters* counters);
  Tensor WritableBuffer();
  Tensor NewBuffer() const;  // spec_.num_elements floats from allocate_
  Tensor CopyOf(const Tensor& t) const;

  const ChunkSpec spec_;
  const JobConfig config_;
  const TensorAllocator allocate_;
  int64_t version_ = kNoVersion;  // until initialised
  int64_t updates_ = 0;
  Tensor values_;
  Tensor previous_values_;                 // sync: the values at previous_version_
  int64_t previous_version_ = kNoVersion;  // kNoVersion: none held
  std::vector<Tensor> spares_;             // earlier buffers, reused once nobody else holds them
  std::vector<Tensor> slots_;
  // sync: step -> worker -> gradient; an empty tensor marks a refused (non-finite) one.
  std::map<int64_t, std::map<int, Tensor>> pending_;
  std::vector<int64_t> worker_clocks_;  // async/ssp: iterations pushed, softsync: applied
  // softsync: the gradients of the next update, in arrival order; an empty tensor marks a
  // refused (non-finite) one.
  struct SoftsyncGradient {
    int worker;
    int64_t clock, base_version;
    Tensor gradient;
  };
  std::vector<SoftsyncGradient> softsync_pending_;
  StepHook step_hook_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_CHUNK_H_
