#include "worker/train/pull_policy.h"

#include <algorithm>

namespace towerps::worker {
namespace {

class LockstepPulls final : public PullPolicy {
 public:
  int64_t NextVersion(int64_t version, int64_t last_step) const override {
    return std::min(version + 1, last_step);
  }
  int64_t Progress(int64_t /*iter*/, int64_t lowest) const override { return lowest; }
  bool RanLast(int64_t /*iter*/, int64_t /*last_step*/) const override { return false; }
  bool PastLast(int64_t version, int64_t last_step) const override { return version >= last_step; }
  bool ReplacesPending(bool exact) const override { return !exact; }
  bool LastPullIsFinal() const override { return true; }
};

class LatestPulls final : public PullPolicy {
 public:
  int64_t NextVersion(int64_t /*version*/, int64_t /*last_step*/) const override { return 0; }
  int64_t Progress(int64_t iter, int64_t /*lowest*/) const override { return iter; }
  bool RanLast(int64_t iter, int64_t last_step) const override { return iter >= last_step; }
  bool PastLast(int64_t /*version*/, int64_t /*last_step*/) const override { return false; }
  bool ReplacesPending(bool /*exact*/) const override { return false; }
  bool LastPullIsFinal() const override { return false; }
};

}  // namespace

const PullPolicy& PullPolicy::For(ps::UpdateMode mode) {
  static const LockstepPulls lockstep;
  static const LatestPulls latest;
  if (mode == ps::UpdateMode::kSync) return lockstep;
  return latest;
}

}  // namespace towerps::worker
