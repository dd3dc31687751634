#include "worker/train/local_training.h"

namespace towerps::worker {

Result<EpochStats> TrainEpoch(Model<float>& model, MomentumSgd& optimizer, Batcher& batches,
                              int64_t epoch, const std::function<void(int64_t)>& on_step) {
  EpochStats stats;
  double loss_sum = 0;
  int64_t correct = 0, step = 0;
  Batch batch;
  batches.StartEpoch(epoch);
  while (batches.Next(&batch)) {
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
  if (stats.examples > 0) {
    stats.mean_loss = loss_sum / static_cast<double>(stats.examples);
    stats.accuracy = static_cast<double>(correct) / static_cast<double>(stats.examples);
  }
  return stats;
}

Result<EpochStats> EvaluateAll(Model<float>& model, Batcher& batches,
                               const std::function<Status(const Batch&)>& prepare) {
  EpochStats stats;
  double loss_sum = 0;
  int64_t correct = 0;
  Batch batch;
  batches.StartEpoch(0);
  while (batches.Next(&batch)) {
    if (prepare) TOWERPS_RETURN_IF_ERROR(prepare(batch));
    TOWERPS_ASSIGN_OR_RETURN(StepResult r,
                             model.Evaluate(batch.x.data(), batch.labels.data(), batch.size));
    loss_sum += r.loss * r.batch;
    correct += r.correct;
    stats.examples += r.batch;
  }
  if (stats.examples > 0) {
    stats.mean_loss = loss_sum / static_cast<double>(stats.examples);
    stats.accuracy = static_cast<double>(correct) / static_cast<double>(stats.examples);
  }
  return stats;
}

}  // namespace towerps::worker
