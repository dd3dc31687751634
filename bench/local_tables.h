// LocalTables: a model's embedding tables held in the benchmark's own process, for
// `towerps-bench train` on models with tables (dlrm_small): what the parameter servers do for a
// job, without them. Rows are created on first use with the servers' initial values
// (job/initial_rows.h) and trained with the servers' own Adagrad (ps/server/optimizer.h), as
// `--table-optimizer adagrad` does.
//
// Each step: Prepare deduplicates the batch's ids per table (job/row_batch.h), gathers their rows
// into one buffer and hands it to the model; after the model's step, Update applies the rows'
// gradients (Model::table_gradient).
//
// Contract: borrows the model, which must outlive it; one thread; not thread-safe.
#ifndef TOWERPS_BENCH_LOCAL_TABLES_H_
#define TOWERPS_BENCH_LOCAL_TABLES_H_

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "job/initial_rows.h"
#include "job/row_batch.h"
#include "ps/server/optimizer.h"
#include "worker/data/batcher.h"
#include "worker/model/model.h"

namespace towerps::bench {

class LocalTables {
 public:
  LocalTables(worker::Model<float>& model, uint64_t seed, float learning_rate,
              float initial_accumulator = 0.1f);

  // The rows of `batch`'s ids, set into the model for its next TrainStep or Evaluate.
  void Prepare(const worker::Batch& batch);
  // Adagrad on the rows Prepare gave, with the gradients of the model's last TrainStep.
  void Update();
  int64_t rows() const;  // held, over every table

 private:
  struct Table {
    worker::TableInput input;
    int dim = 0;
    ps::InitialRows initial;
    std::unordered_map<uint64_t, int64_t> index{};  // id -> row
    std::vector<float> values{}, accumulators{};    // row-major, dim per row
    ps::UniqueIds batch_ids{};
    std::vector<int64_t> batch_rows{};  // the batch's unique ids' rows
    std::vector<float> gathered{};      // their values, for the model
  };
  int64_t RowOf(Table& t, uint64_t id);

  worker::Model<float>& model_;
  const ps::OptimizerOptions adagrad_;  // the servers' Adagrad (ps/server/optimizer.h), on each row
  std::vector<Table> tables_;
};

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_LOCAL_TABLES_H_
