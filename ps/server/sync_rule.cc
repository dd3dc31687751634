#include "ps/server/sync_rule.h"

#include "common/finite.h"

namespace towerps::ps {

Result<PushOutcome> SyncRule::Accept(Contribution c, bool replace, UpdateTarget& target,
                                     ShardCounters& counters) {
  PushOutcome out;
  const int64_t version = target.version();
  if (c.base_version < version) {
    counters.stale_dropped.fetch_add(1, std::memory_order_relaxed);
    out.kind = PushOutcome::Kind::kDropped;
    out.version = version;
    return out;
  }
  if (c.base_version > version) {
    return InvalidArgumentError("gradient for step " + std::to_string(c.base_version) + " of " +
                                target.Describe() + ", which is only at version " +
                                std::to_string(version) + ": pull before pushing");
  }
  std::map<int, Contribution>& bucket = pending_[c.base_version];
  if (auto held = bucket.find(c.worker); held != bucket.end()) {
    return Repeat(std::move(c), &held->second, replace, target, counters);
  }
  const bool refused = RefuseIfNonFinite(c, target, counters, &out);
  const int worker = c.worker;
  bucket.emplace(worker, std::move(c));
  if (static_cast<int>(bucket.size()) >= config_.EffectiveReplicas()) {
    Complete(version, target, counters);
    if (!refused) out.kind = PushOutcome::Kind::kApplied;
  }
  out.version = target.version();
  return out;  // pending, applied or rejected
}

Result<PushOutcome> SyncRule::Repeat(Contribution c, Contribution* held, bool replace,
                                     UpdateTarget& target, ShardCounters& counters) {
  PushOutcome out;
  const Tensor& g = c.gradient;
  // The same bits are a duplicate (a refused one: non-finite again); anything else means the
  // recomputation differs.
  const bool same = held->refused
                        ? !c.sender_checked_finite && FindNonFinite(g.f32(), g.num_elements()) >= 0
                        : SameGradient(*held, c);
  if (!same && replace) {
    RefuseIfNonFinite(c, target, counters, &out);
    *held = std::move(c);
    out.version = target.version();
    return out;  // pending (or rejected), as the one it replaces
  }
  if (!same) {
    return InvalidArgumentError(
        "worker " + std::to_string(c.worker) + " pushed a gradient for step " +
        std::to_string(c.base_version) + " of " + target.Describe() +
        " that differs from the one it pushed before: a restarted worker must recompute "
        "its step bit for bit (same data, parameters and dropout masks)");
  }
  counters.stale_dropped.fetch_add(1, std::memory_order_relaxed);  // dropped, as stale ones
  out.kind = PushOutcome::Kind::kDuplicate;
  out.version = target.version();
  return out;
}

void SyncRule::Complete(int64_t step, UpdateTarget& target, ShardCounters& counters) {
  FormedUpdate update;
  for (const auto& [rank, c] : pending_[step]) {  // std::map: worker-rank order
    if (!c.refused) update.gradients.push_back(&c);
  }
  update.divisor = static_cast<int>(update.gradients.size());
  update.lr = Rate(target);
  target.Apply(update, counters);
  if (!update.gradients.empty()) counters.RecordStaleness(0);
  pending_.erase(step);  // only now: it holds the gradients (often the only handle on them)
}

RuleState SyncRule::Save(int64_t version, bool replica) const {
  RuleState s = UpdateRule::Save(version, replica);
  if (auto it = pending_.find(version); replica && it != pending_.end()) {
    s.pending = it->second;  // gradients are never written after they arrive: sharing is a copy
  }
  return s;
}

void SyncRule::Load(const RuleState& state, int64_t version) {
  UpdateRule::Load(state, version);
  pending_.clear();
  if (!state.pending.empty()) pending_[version] = state.pending;
}

}  // namespace towerps::ps
