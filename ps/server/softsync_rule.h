// SoftsyncRule: Zhang et al. 2016's n-softsync.
//
// Each update averages the first c = workers / n gradients to arrive, whatever version they were
// computed from, summed in worker-rank (then iteration) order; each is recorded with its
// staleness (version at the update - base version), and with --staleness-aware-lr the rate is
// divided by their mean staleness. A late gradient is never dropped: it joins the next update.
// Pulls never wait (workers read the latest values, as in async): with n = 1 an update of one
// gradient per worker is sync's, bit for bit, and n = workers applies each gradient on arrival,
// exactly as async does. (Pulls cannot wait for a worker's own pending gradient: holders group
// arrivals independently, so each could hold a different worker's leftover and all would wait.)
//
// Worker clocks here count applied iterations; pending gradients are not checkpointed, so a
// restored holder gets them again from the rejoining workers.
//
// Contract: as UpdateRule.
#ifndef TOWERPS_PS_SERVER_SOFTSYNC_RULE_H_
#define TOWERPS_PS_SERVER_SOFTSYNC_RULE_H_

#include <vector>

#include "ps/server/update_rule.h"

namespace towerps::ps {

class SoftsyncRule final : public UpdateRule {
 public:
  explicit SoftsyncRule(const JobConfig& config) : UpdateRule(config) {}
  void Load(const RuleState& state, int64_t version) override;

 private:
  Result<PushOutcome> Accept(Contribution c, bool replace, UpdateTarget& target,
                             ShardCounters& counters) override;
  // c gradients are in: applies the average of the finite ones, in worker order.
  void Complete(UpdateTarget& target, ShardCounters& counters);

  // The next update's gradients, in arrival order (an empty gradient: refused as non-finite).
  std::vector<Contribution> pending_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SOFTSYNC_RULE_H_
