// InitialRows: the values a table's row starts from, drawn from (seed, table name, id): uniform in
// [-init_scale, init_scale), 24 random bits per value. Every process computes the same bits: a
// server creating the row when it is first updated (ps/server/table_chunk.h), a worker evaluating a
// checkpoint without servers, whatever the order ids come in. A joined table's row (its variable's
// segments, job/variable.h) is drawn as its segment's table draws the id within the segment
// (job/table_keys.h).
//
// Contract: an immutable value; Fill is a pure function, thread-safe.
#ifndef TOWERPS_JOB_INITIAL_ROWS_H_
#define TOWERPS_JOB_INITIAL_ROWS_H_

#include <cstdint>
#include <string>

#include "job/table_keys.h"
#include "job/variable.h"

namespace towerps::ps {

class InitialRows {
 public:
  InitialRows(uint64_t seed, const std::string& table, float init_scale);
  // The table `variable` (its name, init_scale and segments).
  InitialRows(uint64_t seed, const VariableSpec& variable);
  // Row `id`'s `dim` initial values into `out`.
  void Fill(uint64_t id, int64_t dim, float* out) const;

 private:
  TableKeys keys_;  // (seed, table name), mixed: the table's, or each segment's
  float scale_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_INITIAL_ROWS_H_
