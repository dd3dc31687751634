// --eval-only: a checkpoint directory's parameters evaluated on the job's test set, with no
// servers and no training: the same model, data, normalization and evaluation as the chief's
// at the end of training, so a finished sync job's checkpoint scores what its summary said.
//
// Contract: a free function; reads the checkpoint (ps/server/checkpoint_reader.h) and the data,
// builds the model on the first device of --towers, and returns the evaluation or the first error:
// kFailedPrecondition when the checkpoint holds another model's variables (the model signature
// differs), else the reader's and the data's errors. Only the model must match: the optimizer's
// options do not matter here, and another dataset of the same shape may be evaluated.
// Thread-compatible.
#ifndef TOWERPS_WORKER_TRAIN_EVALUATE_CHECKPOINT_H_
#define TOWERPS_WORKER_TRAIN_EVALUATE_CHECKPOINT_H_

#include <cstdint>
#include <string>

#include "job/job_config.h"
#include "towerps/registry.h"
#include "towerps/result.h"
#include "worker/train/local_training.h"
#include "worker/worker_options.h"

namespace towerps::worker {

struct CheckpointEvaluation {
  EpochStats stats;                          // accuracy, loss, examples (and a binary model's AUC)
  int64_t min_version = 0, max_version = 0;  // of the chunks evaluated
};

// Evaluates `dir`'s parameters; with options.export_npz set, also writes them there.
Result<CheckpointEvaluation> EvaluateCheckpoint(const Registry& registry, const ps::JobConfig& job,
                                                const WorkerOptions& options,
                                                const std::string& dir);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_EVALUATE_CHECKPOINT_H_
