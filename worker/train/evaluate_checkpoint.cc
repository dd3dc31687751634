#include "worker/train/evaluate_checkpoint.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "common/logging.h"
#include "job/initial_rows.h"
#include "job/row_batch.h"
#include "ps/server/checkpoint_reader.h"
#include "worker/model/model_factory.h"
#include "worker/tower_devices.h"
#include "worker/train/job_data.h"
#include "worker/train/local_training.h"
#include "worker/train/npz_export.h"

namespace towerps::worker {
namespace {

// A checkpoint's embedding tables for evaluation without servers: a batch's rows from the rows
// the servers held, and for ids they never trained their initial values, drawn as the servers
// draw them (job/initial_rows.h).
class CheckpointTables {
 public:
  CheckpointTables(const Model<float>& model, const ps::CheckpointParameters& saved,
                   uint64_t seed) {
    for (int t = 0; t < model.num_tables(); ++t) {
      const EmbeddingSpec& spec = model.table(t);
      Table table{.saved = saved.tables.at(static_cast<size_t>(model.table_variable(t))),
                  .initial = ps::InitialRows(seed, spec.name, spec.options.init_scale),
                  .input = {.field_offset = model.table_field_offset(t),
                            .fields = spec.fields,
                            .bag = model.table_bag(t)},
                  .dim = spec.options.dim};
      const int64_t n = table.saved.ids.defined() ? table.saved.ids.num_elements() : 0;
      for (int64_t i = 0; i < n; ++i) table.index[table.saved.ids.u64()[i]] = i;
      tables_.push_back(std::move(table));
    }
  }

  // The rows of `batch`'s ids, set into `model`; valid until the next call.
  Status Load(const Batch& batch, Model<float>& model) {
    for (size_t t = 0; t < tables_.size(); ++t) {
      Table& table = tables_[t];
      table.unique = ps::Deduplicate(TableIds(batch, table.input), 1);
      table.rows.resize(static_cast<size_t>(table.unique.size() * table.dim));
      for (int64_t u = 0; u < table.unique.size(); ++u) {
        const uint64_t id = table.unique.ids.u64()[u];
        float* out = table.rows.data() + u * table.dim;
        auto saved = table.index.find(id);
        if (saved == table.index.end()) {
          table.initial.Fill(id, table.dim, out);
        } else {
          std::copy_n(table.saved.values.f32() + saved->second * table.dim, table.dim, out);
        }
      }
      model.SetTableRows(static_cast<int>(t), table.rows.data(), table.unique.size(),
                         table.unique.inverse.data(), BagOffsets(batch, table.input));
    }
    return Status::Ok();
  }

 private:
  struct Table {
    ps::HeldRows saved;
    ps::InitialRows initial;
    TableInput input;
    int64_t dim = 0;
    std::unordered_map<uint64_t, int64_t> index{};  // id -> its row in `saved`
    ps::UniqueIds unique{};
    std::vector<float> rows{};
  };
  std::vector<Table> tables_;
};

}  // namespace

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
    // Name the model it holds, as the server does: the --model the checkpoint's job had.
    std::string saved_model;
    for (const auto& [flag, value] : saved.job_fields) {
      if (flag == "--model") saved_model = value;
    }
    if (saved_model == "pytorch") {  // a --worker-cmd job's: its model is the script's
      return FailedPreconditionError(
          "checkpoint " + dir +
          " is a PyTorch script's (--worker-cmd), whose model --eval-only cannot build: run the "
          "script again with the same --checkpoint-dir (it resumes where the job ended: "
          "optimizer.start_step) and --export-npz, which its finish() writes");
    }
    return FailedPreconditionError(
        "checkpoint " + dir + " holds " +
        (saved_model.empty() ? "another model" : "the " + saved_model + " model") +
        "'s variables, not " + job.model + "'s" +
        (saved_model.empty() ? " (their names, shapes or kinds differ)" : "") +
        (saved_model.empty() ? "" : ": evaluate it with --model " + saved_model));
  }
  for (int v = 0; v < model->num_variables(); ++v) {
    TOWERPS_RETURN_IF_ERROR(model->SetVariable(v, saved.values[static_cast<size_t>(v)]));
  }
  TOWERPS_ASSIGN_OR_RETURN(
      JobData data,
      LoadJobData(registry, job.dataset,
                  options.MakeDataRequest(model->input_shape(), job.seed,
                                          model->categorical_fields(), model->multi_hot_fields()),
                  job.batch_size, options.shuffle_buffer));
  TOWERPS_ASSIGN_OR_RETURN(JobBatches batches, MakeJobBatches(data, 0, 1, /*with_train=*/false));
  BatchSource* test = batches.test.get();
  if (test->example_shape() != model->input_shape()) {
    return InvalidArgumentError(
        "model " + job.model + " expects " + ShapeToString(model->input_shape()) + " inputs, but " +
        data.test_layout.name + " examples are " + ShapeToString(test->example_shape()));
  }
  CheckpointTables tables(*model, saved, job.seed);
  TOWERPS_ASSIGN_OR_RETURN(const EpochStats eval,
                           EvaluateAll(
                               *model, *test,
                               model->num_tables() == 0 ? std::function<Status(const Batch&)>()
                                                        : [&](const Batch& batch) {
                                                            return tables.Load(batch, *model);
                                                          }));
  if (!options.export_npz.empty()) {
    TOWERPS_RETURN_IF_ERROR(
        WriteNpz(NpzArrays(saved.variables, saved.values, saved.tables,
                           NormalizationArrays(data.test_options.mean, data.test_options.stddev)),
                 options.export_npz));
  }
  return CheckpointEvaluation{
      .stats = eval, .min_version = saved.min_version, .max_version = saved.max_version};
}

}  // namespace towerps::worker
