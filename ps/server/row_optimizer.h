// Per-row optimizers of embedding tables (--table-optimizer): each row of a table is optimized
// on its own when it is updated, and only then (lazily): a row that no gradient touched keeps its
// values and its state.
//
// SGD, momentum and Adagrad are the dense optimizers of ps/server/optimizer.h applied to one row.
// Adam is lazy Adam: a row's moments and its bias correction advance only when the row is updated,
// so its t is the row's own update count (TensorFlow's LazyAdam keeps the moments lazy the same
// way). FTRL-Proximal is McMahan et al. 2013's per-coordinate algorithm, with L1 and L2:
//
//   n' = n + g^2;   sigma = (sqrt(n') - sqrt(n)) / alpha;   z += g - sigma * w;   n = n'
//   w  = 0 where |z| <= l1, else -(z - sign(z) * l1) / ((beta + sqrt(n)) / alpha + l2)
//
// Its state starts at n = 0 and z = -w0 * (beta / alpha + l2), which makes w = w0 until the row
// is updated, so that a table's random initial values are where FTRL starts from (the paper's
// w starts at 0, as a table with --init-scale 0 does here).
//
// A row's state is RowSlots() arrays of `dim` floats: sgd 0, momentum 1 (velocity), adagrad 1
// (accumulator), adam 2 (m, v), ftrl 2 (z, n).
//
// Contract: pure functions on borrowed memory; thread-compatible. Compiled without FP
// contraction, as ps/server/optimizer.cc is, so that every process computes the same bits.
#ifndef TOWERPS_PS_SERVER_ROW_OPTIMIZER_H_
#define TOWERPS_PS_SERVER_ROW_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>

#include "job/job_config.h"

namespace towerps::ps {

// Arrays of `dim` floats each row keeps for the job's --table-optimizer.
int RowSlots(TableOptimizerKind kind);

struct RowUpdate {
  const float* grad = nullptr;  // the row's summed gradient, `dim` floats
  float scale = 1.0f;           // applied to `grad`: 1 / the update's divisor
  float lr = 0.0f;              // the schedule's rate for this update (FTRL's alpha)
  int64_t t = 1;                // the row's updates including this one (lazy Adam's t)
  float* w = nullptr;           // the row's values, updated in place
  float* state = nullptr;       // slots() * dim floats
  int64_t dim = 0;
};

// The job's --table-optimizer, its options resolved once.
class RowOptimizer {
 public:
  explicit RowOptimizer(const JobConfig& job);

  int slots() const { return slots_; }
  // Sets the state of a row just created with values `w`: Adagrad's accumulator to
  // --adagrad-initial, FTRL's z as above, everything else to 0.
  void InitState(const float* w, int64_t dim, float* state) const;
  // Applies one update to each of rows[0, n), distinct rows (weight decay included:
  // g = scale * grad + weight_decay * w).
  void Apply(const RowUpdate* rows, size_t n) const;

 private:
  void ApplyFtrl(const RowUpdate& row) const;

  const TableOptimizerOptions table_;
  const float weight_decay_;
  const float initial_accumulator_;
  // SGD, momentum, Adagrad and Adam: the dense optimizer's options with the table's kind.
  OptimizerOptions dense_;
  const int slots_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_ROW_OPTIMIZER_H_
