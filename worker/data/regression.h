// A seeded synthetic regression dataset whose best possible error is known: `features` standard
// normal features per example, and a target that is a hidden linear function of them (weights
// of unit total variance, so targets have about unit variance) plus Gaussian noise of stddev
// `noise`. No model can predict the noise, so the best test RMSE is `noise`; a model that
// learned the linear function gets there, and one that predicts the mean stays near
// sqrt(1 + noise^2).
//
// Contract: a pure function of its options (same options, same bytes on every platform);
// thread-safe.
#ifndef TOWERPS_WORKER_DATA_REGRESSION_H_
#define TOWERPS_WORKER_DATA_REGRESSION_H_

#include <cstdint>

#include "towerps/dataset.h"
#include "towerps/result.h"

namespace towerps::worker {

struct RegressionOptions {
  int64_t size = 20000;
  int features = 16;
  double noise = 0.1;         // the noise's stddev: the best RMSE
  uint64_t seed = 1;          // the split's: features and noise
  uint64_t weights_seed = 1;  // the hidden weights' (the same for a job's two splits)
};

// kInvalidArgument naming a size or feature count below 1, or a negative noise.
Result<Dataset> MakeRegressionDataset(const RegressionOptions& options);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_REGRESSION_H_
