// Chunk: one piece of one variable held by a server: its values, optimizer slots, version, the
// previous version's values, and copy-on-write. When a gradient is applied, with which others
// and at what rate is the job's update rule's call (ps/server/update_rule.h: one per mode); the
// chunk checks a push, hands it to its rule, and applies the updates the rule forms.
//
// Restarted workers (sync): the chunk keeps the values of its previous version, so that a worker
// that died during step t and recomputes it can pull exactly version t even where the chunk has
// already moved on to t + 1 (ValuesAt). In a full sync job chunk versions differ by at most one,
// so one version back is always enough.
//
// Replicated sync chunks (a step hook is set, ps/server/shard.h): an update first sums the step's
// finite gradients in rank order into one tensor, hands it to the hook (which forwards it to the
// backup), and applies the update from that sum; the backup applies the same sum with ApplyStep.
// The sum is formed exactly as the fused update forms it, so the bits are the same either way.
//
// A gradient holding a NaN or an infinity is refused in every mode (kRejected) and counted: it
// is never applied, so one diverging worker cannot poison the model (see UpdateRule).
//
// Contract: owned and used by exactly one server thread; not thread-safe. values() returns a
// handle that stays valid and unchanged after later updates (copy-on-write: an update whose
// current buffer is still shared, e.g. being sent, writes into another buffer).
#ifndef TOWERPS_PS_SERVER_CHUNK_H_
#define TOWERPS_PS_SERVER_CHUNK_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "job/job_config.h"
#include "job/placement.h"
#include "job/version.h"
#include "ps/server/holder.h"
#include "ps/server/server_stats.h"
#include "ps/server/update_rule.h"
#include "towerps/result.h"

namespace towerps::ps {

class Chunk final : public Holder, private UpdateTarget {
 public:
  // `allocate`: where the values and step sums live (the server's shared-memory arena, so that
  // pulls and forwards lend them without a copy); null: the heap.
  Chunk(const ChunkSpec& spec, const JobConfig& config, TensorAllocator allocate = nullptr);
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;

  const ChunkSpec& spec() const override { return spec_; }
  int64_t version() const override { return version_; }
  using Holder::initialized;
  size_t step_tensors() const override { return 1; }  // a step's sum

  // Sets the initial values (copied) and version 0. Only the first call has an effect; returns
  // whether this one did. Fails on a size mismatch. As a Holder: an init request carries them.
  Result<bool> Init(const Tensor& values);
  Result<bool> Init(const IncomingMessage& request) override;

  // Hands one worker's gradient (kept by reference while pending) to the mode's rule; a
  // non-finite one is kRejected (see above). Errors: not initialised, wrong size, worker rank
  // out of range, and the rule's (a step from the future, or a repeated sync gradient for a
  // pending step that differs from the first; an identical one is kDuplicate).
  // `replace` (sync): a repeated gradient for a pending step replaces the held one instead of
  // being compared (a worker that rejoined where bit-for-bit recomputation is impossible).
  Result<PushOutcome> Push(int worker, int64_t base_version, int64_t clock, const Tensor& gradient,
                           ShardCounters* counters, bool replace = false);
  Result<PushOutcome> Push(Contribution c, ShardCounters* counters, bool replace) override;
  // A push request's one tensor, the gradient, as `worker`'s contribution.
  Result<Contribution> ReadPush(const IncomingMessage& request, int worker,
                                PullAsk* next) const override;

  // How many iterations of `worker` this chunk has applied (or refused): the next one it expects.
  int64_t worker_clock(int worker) const override { return rule_->worker_clock(worker); }
  bool PullReady(int64_t min_version, int64_t clock) const override;
  const Tensor& values() const { return values_; }
  // The values at exactly `version`: the current ones, or (sync) the previous version's; null
  // when this chunk no longer holds, or does not yet have, that version.
  const Tensor* ValuesAt(int64_t version) const;
  // A pull selects the whole chunk; its reply lends values() or ValuesAt(exact version).
  Status ReadPull(const IncomingMessage& request, PullAsk* ask) const override;
  Status AddPullValues(const PullAsk& ask, OutgoingMessage* reply) const override;

  // Sync: called with (step, {sum of its k finite gradients}, k) before a step's update is
  // applied; the sum is shared, never written after. Null: no sum is formed (the fused update).
  void set_step_hook(StepHook hook) override { step_hook_ = std::move(hook); }
  // Sync backup: applies step `step` (= version) from its primary's sum of k gradients (k = 0:
  // the step passes with no update), as CompleteStep does. Errors: not initialised, another
  // version, a wrong size.
  Status ApplyStep(int64_t step, const Tensor& sum, int k, ShardCounters* counters);
  Status ApplyStep(int64_t step, const std::vector<Tensor>& sums, int k,
                   ShardCounters* counters) override;

  // Whether `state` (with a version) has this chunk's size in float32 values and the job's
  // optimizer's slots: what a caller checks before Restore.
  bool Fits(const ChunkState& state) const;
  // Replaces all state with a checkpointed or replicated one (same spec; checked by the caller).
  void Restore(const ChunkState& state);
  // A deep copy; `replica`: with the previous version and the pending gradients too, so that a
  // backup restored from it continues exactly as this chunk does.
  ChunkState Snapshot(bool replica = false) const;
  HolderState Save(bool replica) const override { return Snapshot(replica); }
  // Restore, for a state that Fits (kCorruption otherwise); a state with no version leaves a
  // chunk that has none as it is.
  Status Load(const HolderState& state) override;

 private:
  // UpdateTarget: what the rule sees of this chunk.
  float ScheduledRate() const override;
  std::string Describe() const override;
  void Apply(const FormedUpdate& update, ShardCounters& counters) override;

  // Applies the optimizer to the sum of `k` gradients scaled by 1 / `divisor`.
  void Update(const float* const* grads, int k, int divisor, float lr, ShardCounters& counters);
  Tensor WritableBuffer();
  Tensor NewBuffer() const;  // spec_.num_elements floats from allocate_
  Tensor CopyOf(const Tensor& t) const;

  const ChunkSpec spec_;
  const JobConfig config_;
  const TensorAllocator allocate_;
  const std::unique_ptr<UpdateRule> rule_;
  int64_t version_ = kNoVersion;  // until initialised
  int64_t updates_ = 0;
  Tensor values_;
  Tensor previous_values_;                 // the values at previous_version_ (sync)
  int64_t previous_version_ = kNoVersion;  // kNoVersion: none held
  std::vector<Tensor> spares_;             // earlier buffers, reused once nobody else holds them
  std::vector<Tensor> slots_;
  StepHook step_hook_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_CHUNK_H_
