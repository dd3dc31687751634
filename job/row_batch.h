// UniqueIds: a batch's ids for a table (VariableKind::kTable), each once, and where each of the
// batch's ids went. With it a step pulls and pushes every row it touches once each way, however
// many of its examples share the row: the worker pulls the unique ids' rows, gathers them for the
// batch (GatherRows), and sums the batch's gradient rows of each id (SumRowsById) before pushing.
//
// The unique ids are grouped by the table partition that holds them (TablePartitionOf) and
// increase within each: the order a server takes pushed ids in, so ps::Client sends slices of
// them to the partitions without copying.
//
// Contract: value types and pure functions; thread-compatible. Sums are formed in the batch's
// order, so they are the same bits on every run.
#ifndef TOWERPS_JOB_ROW_BATCH_H_
#define TOWERPS_JOB_ROW_BATCH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "common/tensor.h"

namespace towerps::ps {

struct UniqueIds {
  Tensor ids{};                   // uint64 [unique]
  std::vector<uint32_t> inverse;  // per id of the batch: its index in `ids`
  int64_t size() const { return ids.num_elements(); }
};

// The distinct ids of `ids` for a table of `partitions` partitions (its servers).
UniqueIds Deduplicate(std::span<const uint64_t> ids, int partitions);

// out[i] = rows[inverse[i]]: the batch's rows from the unique ids' rows, `dim` floats each.
void GatherRows(const UniqueIds& unique, const float* rows, int64_t dim, float* out);

// out[u] = the sum, in the batch's order, of the batch's gradient rows of unique id u.
// `grads` holds one row per id of the batch; `out` one per unique id.
void SumRowsById(const UniqueIds& unique, const float* grads, int64_t dim, float* out);

// out[r], for each of `rows` rows of `dim` floats, = the sum from zero, in increasing i, of the
// gradient rows grads[i] with inverse[i] == r: SumRowsById's sums under any numbering of the
// rows, as a PyTorch lookup's (towerps.torch.nn). kInvalidArgument naming an index outside
// [0, rows), before anything is written.
Status SumRowsAt(std::span<const int64_t> inverse, const float* grads, int64_t dim, int64_t rows,
                 float* out);

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_ROW_BATCH_H_
