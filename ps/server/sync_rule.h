// SyncRule: synchronous training, with backup workers (--replicas-to-aggregate).
//
// Gradients for step t (= the version they were computed from) wait until
// JobConfig::EffectiveReplicas() have arrived; the finite ones are summed in worker-rank order,
// averaged, and applied once; the version moves to t + 1. A gradient for a step below the version
// is dropped and counted (its worker was a backup this step). A step whose every gradient was
// refused passes with no update.
//
// Restarted workers: the holder keeps its previous version's values (RetainsPreviousVersion), so
// that a worker that died during step t recomputes it from exactly version t. A repeated push of
// (worker, step) is dropped if the step is applied already, and compared bit for bit with the
// held one if it is still pending: the same bits are a duplicate, others an error naming the
// worker (or, with `replace`, they replace the held gradient).
//
// Contract: as UpdateRule.
#ifndef TOWERPS_PS_SERVER_SYNC_RULE_H_
#define TOWERPS_PS_SERVER_SYNC_RULE_H_

#include <map>

#include "ps/server/update_rule.h"

namespace towerps::ps {

class SyncRule final : public UpdateRule {
 public:
  explicit SyncRule(const JobConfig& config) : UpdateRule(config) {}

  bool RetainsPreviousVersion() const override { return true; }
  void Replayed(int64_t step) override { pending_.erase(step); }
  RuleState Save(int64_t version, bool replica) const override;
  void Load(const RuleState& state, int64_t version) override;

 private:
  Result<PushOutcome> Accept(Contribution c, bool replace, UpdateTarget& target,
                             ShardCounters& counters) override;
  // A restarted worker's second gradient for a pending step.
  Result<PushOutcome> Repeat(Contribution c, Contribution* held, bool replace, UpdateTarget& target,
                             ShardCounters& counters);
  // The step's gradients are all in: applies the average of the finite ones.
  void Complete(int64_t step, UpdateTarget& target, ShardCounters& counters);

  // step -> worker rank -> its contribution; rank order is sum order.
  std::map<int64_t, std::map<int, Contribution>> pending_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SYNC_RULE_H_
