#include "worker/train/evaluate_checkpoint.h"

#include "common/logging.h"
#include "ps/checkpoint_reader.h"
#include "worker/model/model_factory.h"
#include "worker/tower_devices.h"
#include "worker/train/job_data.h"
#include "worker/train/local_training.h"
#include "worker/train/npz_export.h"

namespace towerps::worker {

Result<CheckpointEvaluation> EvaluateCheckpoint(const Registry& registry, const ps::JobConfig& job,
                                                const WorkerOptions& options,
                                                const std::string& dir) {
  TOWERPS_ASSIGN_OR_RETURN(const ps::CheckpointParameters saved, ps::ReadCheckpointParameters(dir));
  std::vector<std::string> warnings;
  TOWERPS_ASSIGN_OR_RETURN(const int gpu_limit, options.GpuCountLimit());
  TOWERPS_ASSIGN_OR_RETURN(
      const std::vector<TowerDevice> devices,
      ParseTowers(options.towers, options.allow_soft_placement, &warnings, gpu_limit));
  for (const std::string& w : warnings) TOWERPS_LOG(kWarning) << "soft placement: " << w;
  TOWERPS_ASSIGN_OR_RETURN(
      auto backend,
      CreateTowerBackend(devices[0], {.intra_op_threads = options.intra_op_threads,
                                      .gpu_memory_fraction = options.gpu_memory_fraction,
                                      .allow_growth = options.allow_growth}));
  TOWERPS_ASSIGN_OR_RETURN(const ModelBuilder builder, registry.DescribeModel(job.model));
  TOWERPS_ASSIGN_OR_RETURN(auto model, BuildModel<float>(builder, backend.get(), job.seed));
  if (model->signature() != saved.model_signature) {
    return FailedPreconditionError("checkpoint " + dir + " holds another model's variables than " +
                                   job.model + "'s (their names, shapes or kinds differ)");
  }
  for (int v = 0; v < model->num_variables(); ++v) {
    TOWERPS_RETURN_IF_ERROR(model->SetVariable(v, saved.values[static_cast<size_t>(v)]));
  }
  TOWERPS_ASSIGN_OR_RETURN(
      JobData data,
      LoadJobData(registry, job.dataset, options.MakeDataRequest(model->input_shape(), job.seed),
                  job.batch_size));
  TOWERPS_ASSIGN_OR_RETURN(auto test, Batcher::Create(&data.test, data.test_options));
  if (test->example_shape() != model->input_shape()) {
    return InvalidArgumentError(
        "model " + job.model + " expects " + ShapeToString(model->input_shape()) + " inputs, but " +
        data.test.name + " examples are " + ShapeToString(test->example_shape()));
  }
  TOWERPS_ASSIGN_OR_RETURN(const EpochStats eval, EvaluateAll(*model, *test));
  if (!options.export_npz.empty()) {
    TOWERPS_RETURN_IF_ERROR(WriteNpz(saved.variables, saved.values, options.export_npz));
  }
  return CheckpointEvaluation{.accuracy = eval.accuracy,
                              .mean_loss = eval.mean_loss,
                              .examples = eval.examples,
                              .min_version = saved.min_version,
                              .max_version = saved.max_version};
}

}  // namespace towerps::worker
