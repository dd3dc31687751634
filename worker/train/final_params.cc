#include "worker/train/final_params.h"

#include <fstream>

#include "worker/train/metrics_log.h"
#include "worker/train/npz_export.h"

namespace towerps::worker {

Status WriteFinalParams(const Model<float>& model, const std::vector<ps::HeldRows>& tables,
                        const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (int v = 0; v < model.num_variables(); ++v) {
    Tensor t = model.GetVariable(v);
    out << model.variables()[v].name << " " << t.num_elements() << "\n";
    out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.byte_size()));
  }
  for (int t = 0; t < model.num_tables() && t < static_cast<int>(tables.size()); ++t) {
    const ps::HeldRows& rows = tables[static_cast<size_t>(t)];
    const int64_t n = rows.ids.defined() ? rows.ids.num_elements() : 0;
    out << model.table(t).name << " " << n << " " << model.table(t).options.dim << "\n";
    if (n == 0) continue;
    out.write(static_cast<const char*>(rows.ids.raw_data()),
              static_cast<std::streamsize>(rows.ids.byte_size()));
    out.write(static_cast<const char*>(rows.values.raw_data()),
              static_cast<std::streamsize>(rows.values.byte_size()));
  }
  out.close();
  if (!out) return IoError("--final-params-out " + path + ": write failed");
  return Status::Ok();
}

Status WriteFinalParameters(const Model<float>& model, const std::vector<ps::HeldRows>& tables,
                            const BatcherOptions& inputs, const WorkerOptions& options, int rank) {
  if (!options.final_params_out.empty()) {
    TOWERPS_RETURN_IF_ERROR(
        WriteFinalParams(model, tables, ExpandRank(options.final_params_out, rank)));
  }
  if (!options.export_npz.empty()) {
    TOWERPS_RETURN_IF_ERROR(WriteNpz(
        model, &tables, NormalizationArrays(inputs.mean, inputs.stddev), options.export_npz));
  }
  return Status::Ok();
}

}  // namespace towerps::worker
