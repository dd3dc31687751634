#include "worker/train/local_training.h"

#include <cmath>
#include <cstdio>

#include "worker/train/roc_auc.h"

namespace towerps::worker {

Result<EpochStats> TrainEpoch(Model<float>& model, MomentumSgd& optimizer, BatchSource& batches,
                              int64_t epoch, const std::function<void(int64_t)>& on_step,
                              const std::function<Status(const Batch&)>& prepare) {
  EpochStats stats;
  double loss_sum = 0;
  int64_t correct = 0, step = 0;
  Batch batch;
  batches.StartEpoch(epoch);
  while (batches.Next(&batch)) {
    if (prepare) TOWERPS_RETURN_IF_ERROR(prepare(batch));
    if (model.regression()) model.SetTargets(batch.targets.data());
    // Each layer is updated as soon as backward has produced its gradient.
    TOWERPS_ASSIGN_OR_RETURN(StepResult r,
                             model.TrainStep(batch.x.data(), batch.labels.data(), batch.size,
                                             [&](int v) { optimizer.StepVariable(v); }));
    loss_sum += r.loss * r.batch;
    correct += r.correct;
    stats.examples += r.batch;
    if (on_step) on_step(step);
    ++step;
  }
  TOWERPS_RETURN_IF_ERROR(batches.status());
  if (stats.examples > 0) {
    stats.mean_loss = loss_sum / static_cast<double>(stats.examples);
    stats.accuracy = static_cast<double>(correct) / static_cast<double>(stats.examples);
  }
  return stats;
}

Result<EpochStats> EvaluateAll(Model<float>& model, BatchSource& batches,
                               const std::function<Status(const Batch&)>& prepare) {
  EpochStats stats;
  double loss_sum = 0;
  int64_t correct = 0;
  const bool binary = model.loss() == LossKind::kSigmoidCrossEntropy;
  std::vector<double> probabilities;
  std::vector<int32_t> labels;
  Batch batch;
  batches.StartEpoch(0);
  while (batches.Next(&batch)) {
    if (prepare) TOWERPS_RETURN_IF_ERROR(prepare(batch));
    if (model.regression()) model.SetTargets(batch.targets.data());
    TOWERPS_ASSIGN_OR_RETURN(StepResult r,
                             model.Evaluate(batch.x.data(), batch.labels.data(), batch.size));
    loss_sum += r.loss * r.batch;
    correct += r.correct;
    stats.examples += r.batch;
    if (binary) {
      probabilities.insert(probabilities.end(), r.probabilities.begin(), r.probabilities.end());
      labels.insert(labels.end(), batch.labels.begin(), batch.labels.begin() + batch.size);
    }
  }
  TOWERPS_RETURN_IF_ERROR(batches.status());
  if (binary) {
    stats.auc = RocAuc(probabilities, labels);
    const double n = static_cast<double>(std::max<size_t>(probabilities.size(), 1));
    double mean = 0, sum2 = 0;
    for (double q : probabilities) mean += q;
    mean /= n;
    for (double q : probabilities) sum2 += (q - mean) * (q - mean);
    stats.output_std = std::sqrt(sum2 / n);
  }
  if (stats.examples > 0) {
    stats.mean_loss = loss_sum / static_cast<double>(stats.examples);
    stats.accuracy = static_cast<double>(correct) / static_cast<double>(stats.examples);
  }
  if (model.regression()) stats.rmse = std::sqrt(stats.mean_loss);
  return stats;
}

std::string DescribeEvaluation(const EpochStats& eval, const std::string& what) {
  char line[256];
  if (eval.regression()) {
    std::snprintf(line, sizeof(line), "%s RMSE = %.6g", what.c_str(), eval.rmse);
  } else if (eval.binary()) {
    std::snprintf(line, sizeof(line), "%s AUC = %.4f, %s log loss = %.4f, %s accuracy = %.4f",
                  what.c_str(), eval.auc, what.c_str(), eval.mean_loss, what.c_str(),
                  eval.accuracy);
  } else {
    std::snprintf(line, sizeof(line), "%s accuracy = %.4f, %s loss = %.6g", what.c_str(),
                  eval.accuracy, what.c_str(), eval.mean_loss);
  }
  return line;
}

}  // namespace towerps::worker
