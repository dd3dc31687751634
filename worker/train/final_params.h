// The --final-params-out file: a trained model's variables, for comparing runs bit for bit.
// Format, per variable in the model's order: a text line "<name> <elements>\n", then that many
// little-endian float32 values.
//
// Contract: a free function; reads the model, writes the file whole or returns kIoError naming
// the path.
#ifndef TOWERPS_WORKER_TRAIN_FINAL_PARAMS_H_
#define TOWERPS_WORKER_TRAIN_FINAL_PARAMS_H_

#include <string>

#include "towerps/status.h"
#include "worker/model/model.h"

namespace towerps::worker {

Status WriteFinalParams(const Model<float>& model, const std::string& path);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_FINAL_PARAMS_H_
