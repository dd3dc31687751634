// The area under the ROC curve of a binary classifier's scores: the probability that a random
// positive example scores above a random negative one, a tie counting half (the Mann-Whitney U
// statistic over positives x negatives). 0.5 is chance, 1 a perfect ranking. Click-through
// models are compared by it because it does not depend on the click rate or on calibration.
//
// Contract: a pure function. labels[i] is 0 or 1 (anything else counts as 1). Exact: the scores
// are sorted once (O(n log n)) and tied scores share their average rank. NaN when either class
// is absent, since no pair can be ranked then, or when a score is NaN.
#ifndef TOWERPS_WORKER_TRAIN_ROC_AUC_H_
#define TOWERPS_WORKER_TRAIN_ROC_AUC_H_

#include <cstdint>
#include <span>

namespace towerps::worker {

double RocAuc(std::span<const double> scores, std::span<const int32_t> labels);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_ROC_AUC_H_
