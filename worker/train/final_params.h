// The chief's files of the final parameters: --final-params-out, for comparing runs bit for bit,
// and --export-npz (worker/train/npz_export.h), for numpy and PyTorch.
// --final-params-out's format, per dense variable in the model's order: a text line
// "<name> <elements>\n", then that many little-endian float32 values; then per embedding table
// "<name> <rows> <dim>\n", the rows' ids (little-endian uint64, increasing) and their values.
//
// Contract: free functions; read the model, write each file whole or return kIoError naming the
// path.
#ifndef TOWERPS_WORKER_TRAIN_FINAL_PARAMS_H_
#define TOWERPS_WORKER_TRAIN_FINAL_PARAMS_H_

#include <string>
#include <vector>

#include "ps/server/checkpoint_reader.h"
#include "towerps/status.h"
#include "worker/data/batcher.h"
#include "worker/model/model.h"
#include "worker/worker_options.h"

namespace towerps::worker {

// `tables`: each table's rows (TableExchange::ExportRows), one entry per table of the model.
Status WriteFinalParams(const Model<float>& model, const std::vector<ps::HeldRows>& tables,
                        const std::string& path);
// Both files, where `options` asks for them ("{rank}" in --final-params-out expands to `rank`);
// the .npz holds the input normalization `inputs` used too.
Status WriteFinalParameters(const Model<float>& model, const std::vector<ps::HeldRows>& tables,
                            const BatcherOptions& inputs, const WorkerOptions& options, int rank);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_FINAL_PARAMS_H_
