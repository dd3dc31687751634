// UpdateRule: the update mode of a job, in one place. A rule decides, for each worker's gradient,
// whether it is applied, with which others, at what rate and with what staleness, and when a
// pull may be answered. It never touches values: the holder of the values (an UpdateTarget: a
// dense variable's Chunk or a table's partition, ps/server/holder.h) applies each update the rule
// forms.
//
// One implementation per mode (ps/server/sync_rule.h, ps/server/async_rule.h with SSP,
// ps/server/softsync_rule.h); UpdateRule::ForMode picks it from the job. What every rule shares
// lives here:
//  - worker clocks: how many iterations of each worker the holder has applied or refused, the
//    iteration it expects next; async, SSP and softsync drop a push below it as kDuplicate (a
//    restarted worker redoing an iteration its predecessor left half-pushed);
//  - the refusal of a non-finite gradient: it is never applied, named in PushOutcome::rejection,
//    and still counts as its worker's push, so that nobody waits for it.
//
// A rule is agnostic to what a gradient holds: it reads it only to check that it is finite (when
// its sender did not say it was: Contribution::sender_checked_finite) and, for a restarted sync
// worker, that it equals the one held. So a table's partition, whose
// contributions are (ids, rows), goes through the same rules as a chunk, with an UpdateTarget
// that sums rows by id (ps/server/table_chunk.h).
//
// Contract: owned by its holder and used by the holder's one thread; not thread-safe. Gradients
// a rule holds (a Contribution's tensors) are shared handles that nobody writes after arrival.
#ifndef TOWERPS_PS_SERVER_UPDATE_RULE_H_
#define TOWERPS_PS_SERVER_UPDATE_RULE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "job/job_config.h"
#include "ps/server/server_stats.h"
#include "towerps/result.h"

namespace towerps::ps {

// What became of one push.
struct PushOutcome {
  enum class Kind { kApplied, kPending, kDropped, kDuplicate, kRejected } kind = Kind::kPending;
  std::string rejection;  // kRejected: why, naming the worker, variable, chunk and value
  int64_t staleness = 0;  // async/ssp/softsync: of this update; sync: 0
  int64_t version = 0;    // the holder's version after the push
};

// One worker's gradient, as a rule sees it.
struct Contribution {
  int worker = 0;
  int64_t base_version = 0;  // the holder's version it was computed from
  int64_t clock = 0;         // the worker's iteration
  // A dense chunk: its gradient. A table's partition: one row of gradient per id, [ids, dim].
  Tensor gradient{};
  // A table's partition only (undefined for a chunk): the rows' ids (uint64, strictly
  // increasing) and each row's update count when the worker pulled it (uint32; row staleness).
  Tensor ids{};
  Tensor pulled_updates{};
  // Held only to count the push: it had a NaN or an infinity and is never applied. Its tensors
  // are released.
  bool refused = false;
  // Its sender checked every value finite (Header.finite): RefuseIfNonFinite need not read it.
  bool sender_checked_finite = false;

  // Its tensors in the order a push carries them (ps/server/holder.h): the gradient, or a
  // partition's ids, gradient rows and pulled update counts.
  std::vector<Tensor> Tensors() const {
    if (!ids.defined()) return {gradient};
    return {ids, gradient, pulled_updates};
  }
};

// Whether two contributions carry the same bits (ids and gradient): a restarted sync worker's
// repeat of a held one.
bool SameGradient(const Contribution& a, const Contribution& b);

// One update formed by a rule: the holder applies it as one version step.
struct FormedUpdate {
  // The finite contributions, in worker-rank (then iteration) order; empty: the version advances
  // with no update (every gradient was refused).
  std::vector<const Contribution*> gradients;
  int divisor = 1;  // the sum of `gradients` is divided by this
  float lr = 0;     // the rate of this update (the schedule's, modulated by the rule)
};

// The holder of the values, as a rule sees it.
class UpdateTarget {
 public:
  virtual ~UpdateTarget() = default;
  virtual int64_t version() const = 0;
  // The schedule's rate at the holder's update count (JobConfig::ScheduleStep), before the
  // rule's scaling.
  virtual float ScheduledRate() const = 0;
  // "variable 3 chunk 1": how errors and refusals name the holder.
  virtual std::string Describe() const = 0;
  // Applies `update` and advances the version by one, counting it in `counters`.
  virtual void Apply(const FormedUpdate& update, ShardCounters& counters) = 0;
};

// A rule's state that a checkpoint or a joining backup carries.
struct RuleState {
  std::vector<int64_t> worker_clocks;
  std::map<int, Contribution> pending;  // sync, replicas only: the current step's, by rank
};

class UpdateRule {
 public:
  static std::unique_ptr<UpdateRule> ForMode(const JobConfig& config);
  virtual ~UpdateRule() = default;
  UpdateRule(const UpdateRule&) = delete;
  UpdateRule& operator=(const UpdateRule&) = delete;

  // Largest version or clock a contribution may name. Both count up from 0 by one per update
  // or iteration, so no job comes near it; a peer's value beyond it is malformed, and keeping
  // below it leaves every difference and increment of them in range.
  static constexpr int64_t kMaxCount = int64_t{1} << 62;

  // Whether a holder's version, update count and its rule's worker clocks, as a checkpoint or a
  // replicated state brings them, are ones it can hold: version in [-1 (none yet), kMaxCount],
  // updates in [0, kMaxCount], each clock in [0, kMaxCount + 1].
  static bool CountsInRange(int64_t version, int64_t updates,
                            const std::vector<int64_t>& worker_clocks);

  // Admits `c` (its gradient's shape: checked by the holder) and applies through `target` every
  // update it completes. `replace` (sync): a restarted worker's repeated gradient for a pending
  // step replaces the held one instead of being compared. Errors (kInvalidArgument) name the
  // holder: a worker rank outside the job, a version or clock outside [0, kMaxCount], a step
  // from the future, a base version above the holder's, or a repeated sync gradient that
  // differs from the first. A refused push changes nothing and is not counted as received.
  Result<PushOutcome> Push(Contribution c, bool replace, UpdateTarget& target,
                           ShardCounters& counters);
  // Whether a pull for (min_version, the worker's clock) may be answered at `version`.
  virtual bool PullReady(int64_t version, int64_t min_version, int64_t /*clock*/) const {
    return version >= min_version;
  }
  // Whether the holder keeps its previous version's values (sync: a restarted worker recomputes
  // the step it died in from exactly that version).
  virtual bool RetainsPreviousVersion() const { return false; }
  // A sync backup applied `step` from its primary's sum: what the rule held for it is done.
  virtual void Replayed(int64_t step) { (void)step; }

  // The next iteration of `worker` the holder expects (0 outside the job's ranks).
  int64_t worker_clock(int worker) const;

  // `replica`: with what only a joining backup needs (sync's pending gradients).
  virtual RuleState Save(int64_t version, bool replica) const;
  virtual void Load(const RuleState& state, int64_t version);

 protected:
  explicit UpdateRule(const JobConfig& config);
  // The rate of an update `target` applies now: its scheduled rate times the job's LrFactor()
  // (each rule may modulate it further, e.g. by staleness).
  float Rate(const UpdateTarget& target) const {
    return static_cast<float>(target.ScheduledRate() * config_.LrFactor());
  }
  // Moves `worker`'s clock past `clock`.
  void Advance(int worker, int64_t clock);
  // A duplicate push of an iteration already applied: counted and dropped.
  bool DropIfApplied(const Contribution& c, const UpdateTarget& target, ShardCounters& counters,
                     PushOutcome* out) const;
  // The mode's part of Push, for a contribution Push has admitted.
  virtual Result<PushOutcome> Accept(Contribution c, bool replace, UpdateTarget& target,
                                     ShardCounters& counters) = 0;
  // version - c.base_version; an error when `c` claims a version the holder has not reached.
  static Result<int64_t> StalenessOf(const Contribution& c, const UpdateTarget& target);
  // Refuses `c` when its gradient holds a NaN or an infinity: counted, `out` says why, and `c`
  // is marked refused, its tensors released, so that it is never applied. Returns whether it was
  // refused. A gradient its sender found finite (sender_checked_finite) is not read again.
  static bool RefuseIfNonFinite(Contribution& c, const UpdateTarget& target,
                                ShardCounters& counters, PushOutcome* out);

  const JobConfig config_;
  std::vector<int64_t> worker_clocks_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_UPDATE_RULE_H_
