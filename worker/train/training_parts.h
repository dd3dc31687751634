// TrainingParts: what a native worker trains with, made before it reaches the servers: its
// towers (the model on every device of --towers) and the straggler plan, the job's data and its
// batch sources with the steps in an epoch, and the records of divergence and collapse that
// watch the run. The trainer (worker/train/trainer.h) owns one and adds the connection; these
// parts hold none.
//
// Contract: made whole by Make (a registry of the options' is borrowed, the stock one owned
// here); not thread-safe: the training thread's.
#ifndef TOWERPS_WORKER_TRAIN_TRAINING_PARTS_H_
#define TOWERPS_WORKER_TRAIN_TRAINING_PARTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "job/job_config.h"
#include "towerps/registry.h"
#include "towerps/result.h"
#include "worker/straggler.h"
#include "worker/tower_group.h"
#include "worker/train/collapse.h"
#include "worker/train/console.h"
#include "worker/train/divergence.h"
#include "worker/train/eval_schedule.h"
#include "worker/train/job_data.h"
#include "worker/train/metrics_log.h"
#include "worker/train/summary.h"
#include "worker/worker_options.h"

namespace towerps::worker {

class TrainingParts {
 public:
  // For worker `rank` of `job`, with `registry` (null: the stock one): kInvalidArgument for a
  // bad straggler setting, an unknown model or dataset, or data that does not fit the model or
  // the job; the loaders' errors.
  static Result<std::unique_ptr<TrainingParts>> Make(const Registry* registry,
                                                     const ps::JobConfig& job,
                                                     const WorkerOptions& worker, int rank);
  TrainingParts(const TrainingParts&) = delete;
  TrainingParts& operator=(const TrainingParts&) = delete;

  // The training set's next batch, into the next epoch when this one is over.
  Status NextBatch(Batch* batch);
  // What is trained, for the log: "mlp (235146 parameters, 6 variables) on 1 tower(s); 468
  // steps per epoch of 64 examples per worker".
  std::string Describe() const;
  // The tables' variable ids.
  std::vector<uint32_t> TableVariables() const;
  // The chief's evaluation where `evals` says (--evals-per-epoch), at `progress`, logged and
  // recorded; `tables` (may be null) loads a test batch's rows first. Returns whether training
  // stops there: the model collapsed to chance, under --on-nonfinite fail.
  // The chief, after its final evaluation in `s`: final parameters at chance are a collapse,
  // whatever the policy (training is over); a model that never left chance did not learn (warned,
  // and s->left_chance false).
  void JudgeFinal(TrainingSummary* s);
  Result<bool> MaybeEvaluate(EvalSchedule& evals, int64_t progress, ConsoleProgress& console,
                             MetricsLog& metrics,
                             const std::function<Status(const Batch&)>& tables);

  std::unique_ptr<TowerGroup> towers;
  StragglerPlan plan;
  std::optional<Divergence> divergence;  // made once the variables are known
  JobData data;
  std::unique_ptr<BatchSource> batcher, test_batcher;
  int64_t steps_per_epoch = 0;
  std::optional<CollapseWatch> collapse;  // made once the data is loaded
  int num_vars = 0;                       // dense variables

 private:
  TrainingParts(const Registry* registry, const ps::JobConfig& job, int rank);
  Status BuildTowers(const WorkerOptions& worker);
  Status LoadData(const WorkerOptions& worker);

  Registry stock_registry_;  // when the options name none
  const Registry* registry_;
  const ps::JobConfig job_;
  const int rank_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_TRAINING_PARTS_H_
