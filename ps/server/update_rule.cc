#include "ps/server/update_rule.h"

#include <algorithm>
#include <cstring>

#include "common/finite.h"
#include "ps/server/async_rule.h"
#include "ps/server/softsync_rule.h"
#include "ps/server/sync_rule.h"

namespace towerps::ps {

std::unique_ptr<UpdateRule> UpdateRule::ForMode(const JobConfig& config) {
  switch (config.mode) {
    case UpdateMode::kSync:
      return std::make_unique<SyncRule>(config);
    case UpdateMode::kAsync:
      return std::make_unique<AsyncRule>(config);
    case UpdateMode::kSsp:
      return std::make_unique<SspRule>(config);
    case UpdateMode::kSoftsync:
      return std::make_unique<SoftsyncRule>(config);
  }
  return nullptr;  // unreachable: JobConfig::Validate admits the modes above
}

UpdateRule::UpdateRule(const JobConfig& config)
    : config_(config), worker_clocks_(static_cast<size_t>(config.workers), 0) {}

int64_t UpdateRule::worker_clock(int worker) const {
  return worker >= 0 && worker < static_cast<int>(worker_clocks_.size())
             ? worker_clocks_[static_cast<size_t>(worker)]
             : 0;
}

Result<PushOutcome> UpdateRule::Push(Contribution c, bool replace, UpdateTarget& target,
                                     ShardCounters& counters) {
  if (c.worker < 0 || c.worker >= config_.workers) {
    return InvalidArgumentError("a push to " + target.Describe() + " from worker rank " +
                                std::to_string(c.worker) + ", outside 0.." +
                                std::to_string(config_.workers - 1));
  }
  for (const auto& [what, value] : {std::pair{"version", c.base_version}, {"clock", c.clock}}) {
    if (value < 0 || value > kMaxCount) {
      return InvalidArgumentError("worker " + std::to_string(c.worker) + "'s push to " +
                                  target.Describe() + " names " + what + " " +
                                  std::to_string(value) + ", outside 0.." +
                                  std::to_string(kMaxCount) + " (a malformed push)");
    }
  }
  counters.gradients_received.fetch_add(1, std::memory_order_relaxed);
  return Accept(std::move(c), replace, target, counters);
}

bool UpdateRule::CountsInRange(int64_t version, int64_t updates,
                               const std::vector<int64_t>& worker_clocks) {
  return version >= -1 && version <= kMaxCount && updates >= 0 && updates <= kMaxCount &&
         std::all_of(worker_clocks.begin(), worker_clocks.end(),
                     [](int64_t c) { return c >= 0 && c <= kMaxCount + 1; });
}

void UpdateRule::Advance(int worker, int64_t clock) {
  int64_t& c = worker_clocks_[static_cast<size_t>(worker)];
  c = std::max(c, clock + 1);
}

RuleState UpdateRule::Save(int64_t /*version*/, bool /*replica*/) const {
  RuleState s;
  s.worker_clocks = worker_clocks_;
  return s;
}

void UpdateRule::Load(const RuleState& state, int64_t /*version*/) {
  worker_clocks_ = state.worker_clocks;
  worker_clocks_.resize(static_cast<size_t>(config_.workers), 0);
}

bool UpdateRule::DropIfApplied(const Contribution& c, const UpdateTarget& target,
                               ShardCounters& counters, PushOutcome* out) const {
  if (c.clock >= worker_clock(c.worker)) return false;
  counters.stale_dropped.fetch_add(1, std::memory_order_relaxed);
  out->kind = PushOutcome::Kind::kDuplicate;
  out->version = target.version();
  return true;
}

Result<int64_t> UpdateRule::StalenessOf(const Contribution& c, const UpdateTarget& target) {
  const int64_t staleness = target.version() - c.base_version;
  if (staleness < 0) {
    return InvalidArgumentError("gradient computed from version " + std::to_string(c.base_version) +
                                " of " + target.Describe() + ", which is only at version " +
                                std::to_string(target.version()));
  }
  return staleness;
}

bool UpdateRule::RefuseIfNonFinite(Contribution& c, const UpdateTarget& target,
                                   ShardCounters& counters, PushOutcome* out) {
  if (c.sender_checked_finite) return false;
  counters.finite_checks.fetch_add(1, std::memory_order_relaxed);
  const int64_t bad = FindNonFinite(c.gradient.f32(), c.gradient.num_elements());
  if (bad < 0) return false;
  counters.nonfinite_rejected.fetch_add(1, std::memory_order_relaxed);
  counters.NoteNonFinite(c.clock, c.worker);
  out->kind = PushOutcome::Kind::kRejected;
  out->rejection = "worker " + std::to_string(c.worker) + "'s gradient for " + target.Describe() +
                   " has " + DescribeValue(c.gradient.f32()[bad]) + " at element " +
                   std::to_string(bad) + ": refused, not applied (that worker's training diverged)";
  c.gradient = Tensor();
  c.ids = Tensor();
  c.pulled_updates = Tensor();
  c.refused = true;
  return true;
}

namespace {

bool SameBytes(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.dtype() == b.dtype() && a.num_elements() == b.num_elements() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

}  // namespace

bool SameGradient(const Contribution& a, const Contribution& b) {
  if (a.refused || b.refused) return a.refused == b.refused;
  return SameBytes(a.ids, b.ids) && SameBytes(a.gradient, b.gradient);
}

}  // namespace towerps::ps
