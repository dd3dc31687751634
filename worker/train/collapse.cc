#include "worker/train/collapse.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "common/logging.h"

namespace towerps::worker {
namespace {

constexpr double kTolerance = 0.01;  // of the constant guess's loss
constexpr double kAccuracyMargin = 0.02;
constexpr double kAucMargin = 0.02;       // around 0.5, a ranking no better than chance
constexpr double kConstantSpread = 1e-3;  // outputs' standard deviation: a constant output
constexpr int kStartSteps = 10;           // the steps whose median is where the loss began
constexpr double kGrowth = 3;             // warn at 3x the start, then at 3x each warned loss

std::string Fixed(double v, int decimals) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", decimals, v);
  return text;
}

// The q-quantile (0..1) of `v`, by the nearest rank.
double Quantile(std::vector<double> v, double q) {
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

}  // namespace

std::string ChanceLevel::Describe() const {
  if (std::abs(constant_loss - std::log(static_cast<double>(classes))) < 1e-6) {
    return "ln " + std::to_string(classes) + " = " + Fixed(constant_loss, 4);
  }
  return Fixed(constant_loss, 4) + ", the entropy of the labels";
}

ChanceLevel ChanceLevelOf(const std::vector<int32_t>& labels, int classes) {
  std::vector<int64_t> count(static_cast<size_t>(std::max(classes, 0)), 0);
  for (int32_t y : labels) {
    if (y >= 0 && y < classes) ++count[static_cast<size_t>(y)];
  }
  return ChanceLevelOfCounts(count, classes);
}

ChanceLevel ChanceLevelOfCounts(const std::vector<int64_t>& counts, int classes) {
  ChanceLevel c;
  c.classes = classes;
  std::vector<int64_t> count(static_cast<size_t>(std::max(classes, 0)), 0);
  for (size_t y = 0; y < counts.size() && y < count.size(); ++y) count[y] = counts[y];
  int64_t total = 0;
  for (int64_t k : count) total += k;
  if (total == 0 || classes < 2) return c;
  const double n = static_cast<double>(total);
  c.majority_share = static_cast<double>(*std::max_element(count.begin(), count.end())) / n;
  // Balanced classes give exactly ln classes (so that Describe() can say so).
  const bool balanced =
      std::all_of(count.begin(), count.end(), [&](int64_t k) { return k == count.front(); });
  if (balanced) {
    c.constant_loss = std::log(static_cast<double>(classes));
    return c;
  }
  for (int64_t k : count) {
    if (k > 0) c.constant_loss -= static_cast<double>(k) / n * std::log(static_cast<double>(k) / n);
  }
  return c;
}

CollapseWatch::CollapseWatch(ChanceLevel train, ChanceLevel test, int window)
    : train_(std::move(train)), test_(std::move(test)), window_(std::max(window, 4)) {}

std::optional<std::string> CollapseWatch::Step(int64_t step, double loss) {
  if (train_.classes < 2 || !std::isfinite(loss)) return std::nullopt;  // NaN: Divergence's
  const double chance = train_.constant_loss;
  // Where the loss began, and its growth far above that: a blow-up leaves chance as learning
  // does (a model may start far above chance, so not from the start).
  if (static_cast<int>(first_.size()) < kStartSteps) {
    first_.push_back(loss);
    if (static_cast<int>(first_.size()) == kStartSteps) {
      began_ = Quantile(first_, 0.5);
      warn_above_ = kGrowth * began_;
    }
  } else {
    if (loss > std::max(2 * chance, kGrowth * began_)) left_chance_ = true;
    if (loss > warn_above_) {
      TOWERPS_LOG(kWarning) << "the training loss is " << Fixed(loss, 4) << " at step " << step
                            << ", " << Fixed(loss / began_, 0) << "x where it began ("
                            << Fixed(began_, 4) << "): the rate may be too high for this mode";
      warn_above_ = kGrowth * loss;
    }
  }
  if (loss < 0.9 * chance) left_chance_ = true;
  recent_.push_back(loss);
  if (static_cast<int>(recent_.size()) > window_) recent_.pop_front();
  if (!left_chance() || reported_ || static_cast<int>(recent_.size()) < window_) {
    return std::nullopt;
  }
  const std::vector<double> v(recent_.begin(), recent_.end());
  const double median = Quantile(v, 0.5);
  const double spread = Quantile(v, 0.75) - Quantile(v, 0.25);
  if (std::abs(median - chance) > kTolerance * chance || spread > kTolerance * chance) {
    return std::nullopt;
  }
  reported_ = true;
  return "the training loss sat at " + Fixed(median, 4) + " (median of steps " +
         std::to_string(step - window_ + 1) + "-" + std::to_string(step) +
         "), the loss of a constant guess (" + train_.Describe() + ")";
}

std::optional<std::string> CollapseWatch::Evaluated(double accuracy, double loss, double auc,
                                                    double output_spread) {
  if (test_.classes < 2) return std::nullopt;
  if (auc >= 0) {
    // A binary model: ranked better than chance, or fell back to a constant output.
    by_auc_ = true;
    last_evaluation_ = "test AUC " + Fixed(auc, 4) + " (chance is 0.5)";
    const bool at_chance = std::abs(auc - 0.5) <= kAucMargin;
    if (!at_chance && auc > 0.5) auc_left_ = true;
    if (!auc_left_ || !at_chance || !(output_spread < kConstantSpread)) return std::nullopt;
    return "test AUC " + Fixed(auc, 4) + " with every output the same (standard deviation " +
           Fixed(output_spread, 6) + "), after it had ranked better than chance";
  }
  last_evaluation_ = "test accuracy " + Fixed(accuracy, 4) + " (the majority class's share is " +
                     Fixed(test_.majority_share, 4) + ")";
  if (accuracy > test_.majority_share + kAccuracyMargin) left_chance_ = true;  // it learned
  if (!left_chance_ || static_cast<int>(recent_.size()) < window_) return std::nullopt;
  // A constant output scores no better on the training batches: a model that fits them (and
  // fails the test set, say on data whose test labels are noise) has not collapsed.
  const std::vector<double> v(recent_.begin(), recent_.end());
  if (Quantile(v, 0.5) < 0.9 * train_.constant_loss) return std::nullopt;
  if (!(accuracy <= test_.majority_share + kAccuracyMargin)) return std::nullopt;
  if (!(loss >= (1 - kTolerance) * test_.constant_loss)) return std::nullopt;  // NaN: not here
  return "test accuracy " + Fixed(accuracy, 4) + ", test loss " + Fixed(loss, 4) +
         ", the loss of a constant guess (" + test_.Describe() + ")";
}

std::optional<bool> CollapseWatch::LeftChance() const {
  if (test_.classes < 2 && train_.classes < 2) return std::nullopt;
  return left_chance();
}

}  // namespace towerps::worker
