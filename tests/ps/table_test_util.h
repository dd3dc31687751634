// Helpers for the table tests: a job, a table partition, and pushes of (id, row) lists.
#ifndef TOWERPS_TESTS_PS_TABLE_TEST_UTIL_H_
#define TOWERPS_TESTS_PS_TABLE_TEST_UTIL_H_

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "job/placement.h"
#include "job/row_batch.h"
#include "ps/server/table_chunk.h"

namespace towerps::ps::testing {

inline JobConfig TableJob(UpdateMode mode, int workers, TableOptimizerKind kind) {
  JobConfig j;
  j.mode = mode;
  j.workers = workers;
  j.servers = 1;
  j.table_optimizer.kind = kind;
  j.table_optimizer.learning_rate = 0.1f;
  j.schedule.kind = LrScheduleKind::kConstant;
  return j;
}

// Partition 0 of a table of `dim` (one server: it holds every id).
inline std::unique_ptr<TableChunk> MakeTable(const JobConfig& job, int64_t dim, int64_t rows = 0,
                                             const std::string& name = "emb",
                                             float init_scale = 0.5f) {
  const VariableSpec var = TableVariable(name, rows, dim, init_scale);
  Result<ChunkPlacement> p = ChunkPlacement::Compute({var}, job.servers, job.partition_bytes);
  return std::make_unique<TableChunk>(p->chunks()[0], var, job);
}

inline Tensor Ids(const std::vector<uint64_t>& ids) {
  Tensor t = Tensor::Empty({static_cast<int64_t>(ids.size())}, DType::kUInt64);
  if (!ids.empty()) std::memcpy(t.raw_data(), ids.data(), ids.size() * 8);
  return t;
}

// Gradient rows [ids, dim] of standard normal draws from `seed`.
inline Tensor RandomRows(int64_t n, int64_t dim, uint32_t seed) {
  Tensor t = Tensor::Empty({n, dim});
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < t.num_elements(); ++i) t.f32()[i] = d(rng);
  return t;
}

// A contribution of `worker` for `ids` (sorted, unique) with `grads`, pulled at `version` with
// every row's update count `pulled` (0: as never updated).
inline Contribution RowsOf(int worker, int64_t version, int64_t clock,
                           const std::vector<uint64_t>& ids, Tensor grads, uint32_t pulled = 0) {
  Tensor counts = Tensor::Empty({static_cast<int64_t>(ids.size())}, DType::kUInt32);
  for (size_t i = 0; i < ids.size(); ++i) counts.u32()[i] = pulled;
  return Contribution{.worker = worker,
                      .base_version = version,
                      .clock = clock,
                      .gradient = std::move(grads),
                      .ids = Ids(ids),
                      .pulled_updates = counts};
}

// The current rows of `ids`, flattened.
inline std::vector<float> Read(const TableChunk& t, const std::vector<uint64_t>& ids) {
  Tensor rows, updates;
  Status s = t.Lookup(Ids(ids), t.version(), &rows, &updates);
  if (!s.ok()) return {};
  return std::vector<float>(rows.f32(), rows.f32() + rows.num_elements());
}

}  // namespace towerps::ps::testing

#endif  // TOWERPS_TESTS_PS_TABLE_TEST_UTIL_H_
