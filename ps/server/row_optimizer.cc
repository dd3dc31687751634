#include "ps/server/row_optimizer.h"

#include <algorithm>
#include <cmath>

#include "ps/server/optimizer.h"

namespace towerps::ps {

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

RowOptimizer::RowOptimizer(const JobConfig& job)
    : table_(job.table_optimizer),
      weight_decay_(job.optimizer.weight_decay),
      initial_accumulator_(job.optimizer.initial_accumulator),
      dense_(job.optimizer),
      slots_(RowSlots(job.table_optimizer.kind)) {
  switch (table_.kind) {
    case TableOptimizerKind::kSgd:
      dense_.kind = OptimizerKind::kSgd;
      break;
    case TableOptimizerKind::kMomentum:
      dense_.kind = OptimizerKind::kMomentum;
      break;
    case TableOptimizerKind::kAdagrad:
      dense_.kind = OptimizerKind::kAdagrad;
      break;
    case TableOptimizerKind::kAdam:
      dense_.kind = OptimizerKind::kAdam;
      break;
    case TableOptimizerKind::kFtrl:  // ApplyFtrl: no dense counterpart
      break;
  }
}

void RowOptimizer::InitState(const float* w, int64_t dim, float* state) const {
  const int64_t n = slots_ * dim;
  const float fill = table_.kind == TableOptimizerKind::kAdagrad ? initial_accumulator_ : 0.0f;
  for (int64_t i = 0; i < n; ++i) state[i] = fill;
  if (table_.kind == TableOptimizerKind::kFtrl) {
    // z such that the closed form gives w back while n = 0 (see the header). The base rate,
    // not a scheduled one: the row may be created at any update.
    const float denominator = table_.ftrl_beta / table_.learning_rate + table_.ftrl_l2;
    for (int64_t i = 0; i < dim; ++i) {
      state[i] = w[i] == 0.0f ? 0.0f : -(w[i] * denominator + std::copysign(table_.ftrl_l1, w[i]));
    }
  }
}

void RowOptimizer::ApplyFtrl(const RowUpdate& r) const {
  const float alpha = r.lr;
  float* z = r.state;
  float* n = r.state + r.dim;
  for (int64_t i = 0; i < r.dim; ++i) {
    const float g = r.grad[i] * r.scale + weight_decay_ * r.w[i];
    const float n_new = n[i] + g * g;
    const float sigma = (std::sqrt(n_new) - std::sqrt(n[i])) / alpha;
    const float zi = z[i] + g - sigma * r.w[i];
    z[i] = zi;
    n[i] = n_new;
    r.w[i] = std::fabs(zi) <= table_.ftrl_l1
                 ? 0.0f
                 : -(zi - std::copysign(table_.ftrl_l1, zi)) /
                       ((table_.ftrl_beta + std::sqrt(n_new)) / alpha + table_.ftrl_l2);
  }
}

void RowOptimizer::Apply(const RowUpdate* rows, size_t n) const {
  if (table_.kind == TableOptimizerKind::kFtrl) {
    for (size_t i = 0; i < n; ++i) ApplyFtrl(rows[i]);
    return;
  }
  constexpr size_t kBatch = 64;
  const float* grads[kBatch];
  UpdateArgs args[kBatch];
  for (size_t begin = 0; begin < n; begin += kBatch) {
    const size_t m = std::min(kBatch, n - begin);
    for (size_t i = 0; i < m; ++i) {
      const RowUpdate& r = rows[begin + i];
      grads[i] = r.grad;
      args[i] = {.grads = &grads[i],
                 .k = 1,
                 .scale = r.scale,
                 .w_in = r.w,
                 .w_out = r.w,
                 .slot0 = slots_ > 0 ? r.state : nullptr,
                 .slot1 = slots_ > 1 ? r.state + r.dim : nullptr,
                 .n = r.dim,
                 .lr = r.lr,
                 .t = r.t};
    }
    ApplyUpdates(dense_, args, m);
  }
}

}  // namespace towerps::ps
