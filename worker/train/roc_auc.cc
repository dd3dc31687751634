#include "worker/train/roc_auc.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "towerps/check.h"

namespace towerps::worker {

double RocAuc(std::span<const double> scores, std::span<const int32_t> labels) {
  TOWERPS_CHECK(scores.size() == labels.size())
      << scores.size() << " scores, " << labels.size() << " labels";
  // A diverged model ranks nothing, and a NaN would break the sort's ordering.
  if (std::any_of(scores.begin(), scores.end(), [](double s) { return std::isnan(s); })) {
    return std::nan("");
  }
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // U = (sum of the positives' ranks) - P(P + 1)/2, ranks from 1, a tie group's ranks averaged.
  double positive_rank_sum = 0;
  uint64_t positives = 0;
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin + 1;
    while (end < order.size() && scores[order[end]] == scores[order[begin]]) ++end;
    const double mean_rank = 0.5 * static_cast<double>(begin + 1 + end);  // of ranks begin+1..end
    for (size_t k = begin; k < end; ++k) {
      if (labels[order[k]] != 0) {
        positive_rank_sum += mean_rank;
        ++positives;
      }
    }
    begin = end;
  }
  const uint64_t negatives = order.size() - positives;
  if (positives == 0 || negatives == 0) return std::nan("");
  const double p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2) / (p * static_cast<double>(negatives));
}

}  // namespace towerps::worker
