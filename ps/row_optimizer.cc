#include "ps/row_optimizer.h"

#include <cmath>

#include "ps/optimizer.h"

namespace towerps::ps {
namespace {

// The job's dense optimizer options with the table's kind and rate: the dense update applied to
// one row is the row optimizer for every kind but FTRL.
OptimizerOptions DenseOptionsFor(const JobConfig& job, float lr) {
  OptimizerOptions o = job.optimizer;
  switch (job.table_optimizer.kind) {
    case TableOptimizerKind::kSgd:
      o.kind = OptimizerKind::kSgd;
      break;
    case TableOptimizerKind::kMomentum:
      o.kind = OptimizerKind::kMomentum;
      break;
    case TableOptimizerKind::kAdagrad:
      o.kind = OptimizerKind::kAdagrad;
      break;
    case TableOptimizerKind::kAdam:
      o.kind = OptimizerKind::kAdam;
      break;
    case TableOptimizerKind::kFtrl:  // ApplyFtrl: no dense counterpart
      break;
  }
  o.learning_rate = lr;
  return o;
}

void ApplyFtrl(const JobConfig& job, const RowUpdate& r) {
  const TableOptimizerOptions& o = job.table_optimizer;
  const float alpha = r.lr;
  const float wd = job.optimizer.weight_decay;
  float* z = r.state;
  float* n = r.state + r.dim;
  for (int64_t i = 0; i < r.dim; ++i) {
    const float g = r.grad[i] * r.scale + wd * r.w[i];
    const float n_new = n[i] + g * g;
    const float sigma = (std::sqrt(n_new) - std::sqrt(n[i])) / alpha;
    const float zi = z[i] + g - sigma * r.w[i];
    z[i] = zi;
    n[i] = n_new;
    r.w[i] = std::fabs(zi) <= o.ftrl_l1
                 ? 0.0f
                 : -(zi - std::copysign(o.ftrl_l1, zi)) /
                       ((o.ftrl_beta + std::sqrt(n_new)) / alpha + o.ftrl_l2);
  }
}

}  // namespace

int RowSlots(TableOptimizerKind kind) {
  switch (kind) {
    case TableOptimizerKind::kSgd:
      return 0;
    case TableOptimizerKind::kMomentum:
    case TableOptimizerKind::kAdagrad:
      return 1;
    case TableOptimizerKind::kAdam:
    case TableOptimizerKind::kFtrl:
      return 2;
  }
  return 0;
}

void InitRowState(const JobConfig& job, const float* w, int64_t dim, float* state) {
  const TableOptimizerOptions& o = job.table_optimizer;
  const int64_t n = RowSlots(o.kind) * dim;
  const float fill =
      o.kind == TableOptimizerKind::kAdagrad ? job.optimizer.initial_accumulator : 0.0f;
  for (int64_t i = 0; i < n; ++i) state[i] = fill;
  if (o.kind == TableOptimizerKind::kFtrl) {
    // z such that the closed form gives w back while n = 0 (see the header). The base rate,
    // not a scheduled one: the row may be created at any update.
    const float denominator = o.ftrl_beta / o.learning_rate + o.ftrl_l2;
    for (int64_t i = 0; i < dim; ++i) {
      state[i] = w[i] == 0.0f ? 0.0f : -(w[i] * denominator + std::copysign(o.ftrl_l1, w[i]));
    }
  }
}

void ApplyRowUpdate(const JobConfig& job, const RowUpdate& r) {
  if (job.table_optimizer.kind == TableOptimizerKind::kFtrl) {
    ApplyFtrl(job, r);
    return;
  }
  const float* grads[1] = {r.grad};
  UpdateArgs args;
  args.grads = grads;
  args.k = 1;
  args.scale = r.scale;
  args.w_in = r.w;
  args.w_out = r.w;
  args.slot0 = RowSlots(job.table_optimizer.kind) > 0 ? r.state : nullptr;
  args.slot1 = RowSlots(job.table_optimizer.kind) > 1 ? r.state + r.dim : nullptr;
  args.n = r.dim;
  args.lr = r.lr;
  args.t = r.t;
  ApplyUpdate(DenseOptionsFor(job, r.lr), args);
}

}  // namespace towerps::ps
