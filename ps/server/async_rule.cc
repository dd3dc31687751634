#include "ps/server/async_rule.h"

#include <algorithm>

namespace towerps::ps {

Result<PushOutcome> AsyncRule::Accept(Contribution c, bool /*replace*/, UpdateTarget& target,
                                      ShardCounters& counters) {
  PushOutcome out;
  if (DropIfApplied(c, target, counters, &out)) return out;
  TOWERPS_ASSIGN_OR_RETURN(const int64_t staleness, StalenessOf(c, target));
  FormedUpdate update;
  if (!RefuseIfNonFinite(c, target, counters, &out)) {
    const float lr = Rate(target);
    update.gradients.push_back(&c);
    update.lr =
        config_.staleness_aware_lr ? lr / static_cast<float>(std::max<int64_t>(1, staleness)) : lr;
    out.kind = PushOutcome::Kind::kApplied;
    out.staleness = staleness;
  }
  target.Apply(update, counters);  // a refused gradient: the version advances with no update
  if (!update.gradients.empty()) counters.RecordStaleness(staleness);
  Advance(c.worker, c.clock);
  out.version = target.version();
  return out;
}

bool SspRule::PullReady(int64_t version, int64_t min_version, int64_t clock) const {
  if (version < min_version) return false;
  const int64_t slowest = *std::min_element(worker_clocks_.begin(), worker_clocks_.end());
  // Added on this side: `clock` is a peer's, unchecked; `slowest` is below kMaxCount.
  return slowest + config_.staleness >= clock;
}

}  // namespace towerps::ps
