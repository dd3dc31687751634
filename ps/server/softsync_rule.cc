#include "ps/server/softsync_rule.h"

#include <algorithm>
#include <tuple>

namespace towerps::ps {

Result<PushOutcome> SoftsyncRule::Accept(Contribution c, bool /*replace*/, UpdateTarget& target,
                                         ShardCounters& counters) {
  PushOutcome out;
  if (DropIfApplied(c, target, counters, &out)) return out;
  TOWERPS_ASSIGN_OR_RETURN(const int64_t staleness, StalenessOf(c, target));
  for (const Contribution& p : pending_) {
    if (p.worker == c.worker && p.clock == c.clock) {  // a restarted worker's repeat, pending
      counters.stale_dropped.fetch_add(1, std::memory_order_relaxed);
      out.kind = PushOutcome::Kind::kDuplicate;
      out.version = target.version();
      return out;
    }
  }
  const bool refused = RefuseIfNonFinite(c, target, counters, &out);
  pending_.push_back(std::move(c));
  if (static_cast<int>(pending_.size()) >= config_.SoftsyncBatch()) {
    out.staleness = staleness;
    Complete(target, counters);
    if (!refused) out.kind = PushOutcome::Kind::kApplied;
  }
  out.version = target.version();
  return out;  // pending, applied or rejected
}

void SoftsyncRule::Complete(UpdateTarget& target, ShardCounters& counters) {
  // Worker-rank order (then iteration: a fast worker may have two in one update), so the sum is
  // formed as sync forms it: n = 1 with one gradient per worker is sync's update, bit for bit.
  std::sort(pending_.begin(), pending_.end(), [](const Contribution& a, const Contribution& b) {
    return std::tie(a.worker, a.clock) < std::tie(b.worker, b.clock);
  });
  FormedUpdate update;
  double staleness_sum = 0;  // each below 2^62 (UpdateRule::Push); their sum need not be
  for (const Contribution& p : pending_) {
    Advance(p.worker, p.clock);
    if (p.refused) continue;  // non-finite
    update.gradients.push_back(&p);
    const int64_t staleness = target.version() - p.base_version;
    staleness_sum += static_cast<double>(staleness);
    counters.RecordStaleness(staleness);
  }
  const int k = static_cast<int>(update.gradients.size());
  update.divisor = std::max(k, 1);
  const float lr = Rate(target);
  // Zhang et al.'s modulation: the rate over the mean staleness of the update's gradients.
  const double mean = k > 0 ? staleness_sum / k : 0.0;
  update.lr = config_.staleness_aware_lr ? static_cast<float>(lr / std::max(1.0, mean)) : lr;
  target.Apply(update, counters);  // none finite: the version still counts the update
  pending_.clear();                // only now: it holds the gradients
}

void SoftsyncRule::Load(const RuleState& state, int64_t version) {
  UpdateRule::Load(state, version);
  pending_.clear();
}

}  // namespace towerps::ps
