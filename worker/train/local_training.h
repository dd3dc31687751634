// Single-process training helpers: one epoch of SGD over a Batcher, and accuracy over a dataset.
// Used by `towerps-bench train`, the accuracy tests and scripts/check_accuracy.sh.
// Contract: borrowed arguments; not thread-safe.
#ifndef TOWERPS_WORKER_TRAIN_LOCAL_TRAINING_H_
#define TOWERPS_WORKER_TRAIN_LOCAL_TRAINING_H_

#include <functional>
#include <string>

#include "towerps/result.h"
#include "worker/data/batcher.h"
#include "worker/model/model.h"
#include "worker/train/momentum_sgd.h"

namespace towerps::worker {

struct EpochStats {
  double mean_loss = 0;
  double accuracy = 0;  // over the examples seen
  int64_t examples = 0;
  // EvaluateAll of a binary model (LossKind::kSigmoidCrossEntropy): the ROC AUC of its
  // probabilities (roc_auc.h), and mean_loss is the log loss. -1 for other models.
  double auc = -1;
  double output_std = -1;  // binary: the standard deviation of its probabilities
  // EvaluateAll of a regression model (LossKind::kMeanSquaredError): the root of mean_loss, the
  // mean squared error. -1 for other models.
  double rmse = -1;
  bool binary() const { return auc != -1; }
  bool regression() const { return rmse != -1; }
};

// "test accuracy = 0.8123, test loss = 0.5311"; for a binary model
// "test AUC = 0.7904, test log loss = 0.4622, test accuracy = 0.7811"; for a regression model
// "test RMSE = 0.1012". `what` replaces "test".
std::string DescribeEvaluation(const EpochStats& eval, const std::string& what = "test");

// Trains on every batch of `epoch`, applying the optimizer to each layer as soon as backward has
// produced its gradient. `on_step(step_in_epoch)`, when set, is called after each step;
// `prepare`, when set, before it, with its batch (a model with tables gets its rows there).
Result<EpochStats> TrainEpoch(Model<float>& model, MomentumSgd& optimizer, BatchSource& batches,
                              int64_t epoch, const std::function<void(int64_t)>& on_step = nullptr,
                              const std::function<Status(const Batch&)>& prepare = nullptr);

// Loss and accuracy (and a binary model's AUC) over one pass of `batches` (build it with
// drop_remainder = false).
// `prepare`, when set, runs before each batch is evaluated: a model with embedding tables gets
// the batch's rows there (Model::SetTableRows).
Result<EpochStats> EvaluateAll(Model<float>& model, BatchSource& batches,
                               const std::function<Status(const Batch&)>& prepare = nullptr);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_LOCAL_TRAINING_H_
