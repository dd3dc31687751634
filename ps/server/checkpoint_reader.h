// Reading a whole job's parameters back from its checkpoint directory, without servers: every
// server's "ps-<rank>.ckpt" with its deltas loaded and validated (ps/server/checkpoint_chain.h),
// and each variable put back together from its chunks by the placement the servers used. For
// evaluating a checkpoint (towerps-worker --eval-only) and exporting it.
//
// Contract: a free function; reads the files, keeps nothing open. Errors name the directory or
// file: kNotFound when there is no ps-0.ckpt, kFailedPrecondition when the files disagree (model,
// server count, job options) or a chunk is missing, kCorruption from the files themselves.
// Thread-compatible.
#ifndef TOWERPS_PS_SERVER_CHECKPOINT_READER_H_
#define TOWERPS_PS_SERVER_CHECKPOINT_READER_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/tensor.h"
#include "job/variable.h"
#include "towerps/result.h"

namespace towerps::ps {

// A table's rows as its servers held them: rows never updated are not listed (they are at
// their initial values). Not ps/server/table_rows.h's TableRows, the rows a partition holds.
struct HeldRows {
  Tensor ids{};     // uint64 [n], partition by partition
  Tensor values{};  // float32 [n, dim]
};

struct CheckpointParameters {
  std::vector<VariableSpec> variables;  // the job's variable list, in its order
  // One per variable, shaped as declared; a table's is empty ([0, dim]): see `tables`.
  std::vector<Tensor> values;
  std::vector<HeldRows> tables;  // one per variable; empty for a dense one
  uint64_t model_signature = 0;
  // The lowest and highest chunk version saved: equal for a sync job that ended cleanly.
  int64_t min_version = 0, max_version = 0;
  std::vector<std::pair<std::string, std::string>> job_fields;  // as in CheckpointMeta
};

Result<CheckpointParameters> ReadCheckpointParameters(const std::string& dir);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_CHECKPOINT_READER_H_
