// AsyncRule and SspRule: each gradient applied on its own, as it arrives.
//
//  async  Each gradient is applied on arrival; its staleness (version - base version) is
//         recorded; with --staleness-aware-lr the rate is divided by max(1, staleness).
//  ssp    As async; in addition a pull for clock c is ready only once every worker has pushed
//         clock c - s - 1 or later (Ho et al. 2013), so that no worker is more than s ahead.
//
// A refused (non-finite) gradient still counts: the version advances with no update, so it
// goes on counting every worker's pushes (the chief waits for all of them at the end), and the
// worker's clock moves on, so that SSP does not hold the others back.
//
// Contract: as UpdateRule.
#ifndef TOWERPS_PS_SERVER_ASYNC_RULE_H_
#define TOWERPS_PS_SERVER_ASYNC_RULE_H_

#include "ps/server/update_rule.h"

namespace towerps::ps {

class AsyncRule : public UpdateRule {
 public:
  explicit AsyncRule(const JobConfig& config) : UpdateRule(config) {}

 protected:
  Result<PushOutcome> Accept(Contribution c, bool replace, UpdateTarget& target,
                             ShardCounters& counters) override;
};

class SspRule final : public AsyncRule {
 public:
  explicit SspRule(const JobConfig& config) : AsyncRule(config) {}
  bool PullReady(int64_t version, int64_t min_version, int64_t clock) const override;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_ASYNC_RULE_H_
