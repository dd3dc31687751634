#include "worker/train/final_params.h"

#include <fstream>

#include "worker/train/metrics_log.h"
#include "worker/train/npz_export.h"

namespace towerps::worker {

Status WriteFinalParams(const Model<float>& model, const std::string& path) {
  std::ofstream out(path, std::ios::binary);
  for (int v = 0; v < model.num_variables(); ++v) {
    Tensor t = model.GetVariable(v);
    out << model.variables()[v].name << " " << t.num_elements() << "\n";
    out.write(static_cast<const char*>(t.raw_data()), static_cast<std::streamsize>(t.byte_size()));
  }
  out.close();
  if (!out) return IoError("--final-params-out " + path + ": write failed");
  return Status::Ok();
}

Status WriteFinalParameters(const Model<float>& model, const WorkerOptions& options, int rank) {
  if (!options.final_params_out.empty()) {
    TOWERPS_RETURN_IF_ERROR(WriteFinalParams(model, ExpandRank(options.final_params_out, rank)));
  }
  if (!options.export_npz.empty()) TOWERPS_RETURN_IF_ERROR(WriteNpz(model, options.export_npz));
  return Status::Ok();
}

}  // namespace towerps::worker
