#include "worker/train/training_parts.h"

#include "common/logging.h"
#include "worker/train/local_training.h"

namespace towerps::worker {

TrainingParts::TrainingParts(const Registry* registry, const ps::JobConfig& job, int rank)
    : registry_(registry), job_(job), rank_(rank) {
  if (registry_ == nullptr) {
    stock_registry_ = StockRegistry();
    registry_ = &stock_registry_;
  }
}

Result<std::unique_ptr<TrainingParts>> TrainingParts::Make(const Registry* registry,
                                                           const ps::JobConfig& job,
                                                           const WorkerOptions& worker, int rank) {
  std::unique_ptr<TrainingParts> parts(new TrainingParts(registry, job, rank));
  TOWERPS_RETURN_IF_ERROR(parts->BuildTowers(worker));
  TOWERPS_RETURN_IF_ERROR(parts->LoadData(worker));
  return parts;
}

Status TrainingParts::BuildTowers(const WorkerOptions& worker) {
  TOWERPS_ASSIGN_OR_RETURN(plan, StragglerPlan::Parse(worker.straggler, worker.straggler_dist,
                                                      worker.slow_workers, job_.workers));
  TOWERPS_ASSIGN_OR_RETURN(const ModelBuilder builder, registry_->DescribeModel(job_.model));
  TOWERPS_ASSIGN_OR_RETURN(towers,
                           TowerGroup::ForWorker(worker, builder, job_.seed, job_.batch_size));
  num_vars = towers->model(0).num_variables();
  std::vector<std::string> names;
  for (const auto& var : towers->model(0).variables()) names.push_back(var.name);
  divergence.emplace(worker.on_nonfinite, rank_, std::move(names));
  return Status::Ok();
}

Status TrainingParts::LoadData(const WorkerOptions& worker) {
  const Model<float>& m0 = towers->model(0);
  TOWERPS_ASSIGN_OR_RETURN(
      data, LoadJobData(*registry_, job_.dataset,
                        worker.MakeDataRequest(m0.input_shape(), job_.seed, m0.categorical_fields(),
                                               m0.multi_hot_fields()),
                        job_.batch_size, worker.shuffle_buffer));
  TOWERPS_ASSIGN_OR_RETURN(JobBatches batches, MakeJobBatches(data, rank_, job_.workers));
  batcher = std::move(batches.train);
  test_batcher = std::move(batches.test);
  TOWERPS_ASSIGN_OR_RETURN(steps_per_epoch, CheckDataFitsJob(data, *batcher, m0, job_.model,
                                                             job_.workers, job_.batch_size));
  collapse.emplace(ChanceLevelOfCounts(data.train_layout.label_counts, m0.num_classes()),
                   ChanceLevelOfCounts(data.test_layout.label_counts, m0.num_classes()));
  if (data.shuffle_buffer > 0) {
    TOWERPS_LOG(kInfo) << "streaming " << data.train_layout.name << " ("
                       << data.train_layout.examples << " examples) through a shuffle buffer of "
                       << data.shuffle_buffer << " examples";
  }
  return Status::Ok();
}

Status TrainingParts::NextBatch(Batch* batch) {
  if (batcher->Next(batch)) return Status::Ok();
  TOWERPS_RETURN_IF_ERROR(batcher->status());
  batcher->StartEpoch(batcher->epoch() + 1);
  if (!batcher->Next(batch)) {
    TOWERPS_RETURN_IF_ERROR(batcher->status());
    return InternalError("the batcher produced an empty epoch");
  }
  return Status::Ok();
}

std::string TrainingParts::Describe() const {
  const Model<float>& m0 = towers->model(0);
  const int t = m0.num_tables();
  const std::string tables = t == 0 ? ""
                                    : ", " + std::to_string(t) + " embedding table" +
                                          (t > 1 ? "s" : "") + " on the servers";
  return job_.model + " (" + std::to_string(m0.num_parameters()) + " parameters, " +
         std::to_string(num_vars) + " variables" + tables + ") on " +
         std::to_string(towers->size()) + " tower(s); " + std::to_string(steps_per_epoch) +
         " steps per epoch of " + std::to_string(job_.batch_size) + " examples per worker";
}

std::vector<uint32_t> TrainingParts::TableVariables() const {
  std::vector<uint32_t> ids;
  const Model<float>& m0 = towers->model(0);
  for (int t = 0; t < m0.num_tables(); ++t) {
    ids.push_back(static_cast<uint32_t>(m0.table_variable(t)));
  }
  return ids;
}

Result<bool> TrainingParts::MaybeEvaluate(EvalSchedule& evals, int64_t progress,
                                          ConsoleProgress& console, MetricsLog& metrics,
                                          const std::function<Status(const Batch&)>& tables) {
  if (rank_ != 0 || !evals.Due(progress)) return false;
  TOWERPS_ASSIGN_OR_RETURN(EpochStats eval, EvaluateAll(towers->model(0), *test_batcher, tables));
  const int64_t epoch = progress / steps_per_epoch;
  const std::string at = evals.EndsEpoch(progress) ? "epoch " + std::to_string(epoch) + " done"
                                                   : "step " + std::to_string(progress);
  TOWERPS_LOG(kInfo) << at << ": " << DescribeEvaluation(eval);
  metrics.Eval(progress, epoch, eval);
  console.Evaluated(progress, eval.regression() ? -1 : eval.accuracy);  // no classes: none
  const auto what = collapse->Evaluated(eval.accuracy, eval.mean_loss, eval.auc, eval.output_std);
  return what && divergence->StopsOnCollapse(*what, progress);
}

void TrainingParts::JudgeFinal(TrainingSummary* s) {
  if (auto what =
          collapse->Evaluated(s->test_accuracy, s->test_loss, s->test_auc, s->test_output_std)) {
    divergence->StopsOnCollapse(*what, s->steps);
    divergence->Fill(s);
  }
  s->left_chance = collapse->LeftChance();
  if (s->left_chance == false) {
    TOWERPS_LOG(kWarning) << "the model did not learn: " << collapse->NotLearning()
                          << "; it never left chance (not a collapse): check the labels and "
                             "features, or raise --lr or the steps";
  }
}

}  // namespace towerps::worker
