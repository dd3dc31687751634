#include "worker/train/divergence.h"

#include <cmath>
#include <utility>

#include "common/finite.h"
#include "common/logging.h"

namespace towerps::worker {

Divergence::Divergence(OnNonFinite policy, int rank, std::vector<std::string> names)
    : policy_(policy),
      rank_(rank),
      names_(std::move(names)),
      nonfinite_at_(names_.size(), -1),
      nonfinite_value_(names_.size(), 0.0f) {}

bool Divergence::CheckGradient(int v, const Tensor& gradient) {
  nonfinite_at_[v] = FindNonFinite(gradient.f32(), gradient.num_elements());
  if (nonfinite_at_[v] < 0) return true;
  nonfinite_value_[v] = gradient.f32()[nonfinite_at_[v]];
  return policy_ != OnNonFinite::kFail;
}

bool Divergence::StopsAfterStep(double loss, int64_t step) {
  const std::string bad = NonFiniteIn(loss);
  return !bad.empty() && Record("nonfinite", bad, step);
}

bool Divergence::StopsOnCollapse(const std::string& what, int64_t step) {
  return Record("collapse", what, step);
}

bool Divergence::Record(const char* kind, const std::string& what, int64_t step) {
  const bool fail = policy_ == OnNonFinite::kFail;
  if (diverged_) return fail;
  diverged_ = true;
  kind_ = kind;
  diverged_at_step_ = step;
  divergence_ = what;
  if (!fail) {
    const bool collapse = kind_ == std::string("collapse");
    TOWERPS_LOG(kWarning) << (collapse ? "the model collapsed to chance" : "diverged")
                          << " at step " << step << " (" << what
                          << "); --on-nonfinite continue: training on"
                          << (collapse ? "" : " (the servers refuse non-finite gradients)");
  }
  return fail;
}

std::string Divergence::NonFiniteIn(double loss) const {
  if (!std::isfinite(loss)) return "loss = " + DescribeValue(loss);
  for (size_t v = 0; v < names_.size(); ++v) {
    if (nonfinite_at_[v] < 0) continue;
    return "gradient of " + names_[v] + " = " + DescribeValue(nonfinite_value_[v]) +
           " at element " + std::to_string(nonfinite_at_[v]);
  }
  return "";
}

void Divergence::Fill(TrainingSummary* s) const {
  s->nonfinite_dropped = refused_;
  if (!diverged_) return;  // the chief's summary may already say so for other workers
  s->diverged = true;
  s->divergence_kind = kind_;
  s->diverged_at_step = diverged_at_step_;
  s->diverged_worker = rank_;
  s->divergence = divergence_;
}

}  // namespace towerps::worker
