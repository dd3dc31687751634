// Server-side optimizers: SGD, momentum (optionally Nesterov), Adam and Adagrad, with L2 weight
// decay, and the learning-rate schedules.
//
// ApplyUpdate makes one fused pass over a chunk: it sums the k gradients in the order given
// (callers pass them in worker-rank order, so results are bitwise reproducible), scales the sum,
// and applies the update, reading w_in and writing w_out. w_out may equal w_in (in place); a
// different w_out lets the server update parameters while an older version is still being sent.
//
// Formulas (g is the averaged gradient plus weight_decay * w; t counts updates from 1):
//   sgd       w -= lr * g
//   momentum  v = m*v + g;  w -= lr * v            (Nesterov: w -= lr * (g + m*v))
//   adam      m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g^2;
//             w -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps)
//   adagrad   a += g^2;  w -= lr * g / sqrt(a)      (a starts at initial_accumulator)
//
// Contract: pointers are borrowed; no allocation; thread-compatible.
#ifndef TOWERPS_PS_SERVER_OPTIMIZER_H_
#define TOWERPS_PS_SERVER_OPTIMIZER_H_

#include <cstddef>
#include <cstdint>

#include "job/job_config.h"

namespace towerps::ps {

// Arrays of chunk size the optimizer keeps: sgd 0, momentum 1, adam 2, adagrad 1.
int OptimizerSlots(OptimizerKind kind);
// The value every slot starts at (adagrad: --initial-accumulator; the rest 0).
float OptimizerSlotInitialValue(const OptimizerOptions& options);

// The learning rate for the update that follows `updates_done` earlier updates.
float LearningRateAt(const OptimizerOptions& optimizer, const LrScheduleOptions& schedule,
                     int64_t updates_done);

struct UpdateArgs {
  const float* const* grads = nullptr;  // k arrays of n floats, summed in this order
  int k = 1;
  float scale = 1.0f;  // applied to the sum: 1/k for an average
  const float* w_in = nullptr;
  float* w_out = nullptr;
  float* slot0 = nullptr;
  float* slot1 = nullptr;
  int64_t n = 0;
  float lr = 0.0f;
  int64_t t = 1;  // 1-based index of this update (Adam bias correction)
};

void ApplyUpdate(const OptimizerOptions& options, const UpdateArgs& args);
// ApplyUpdate of each of args[0, n), in order: a batch of a table's rows in one call, the
// arithmetic inlined into the loop over them.
void ApplyUpdates(const OptimizerOptions& options, const UpdateArgs* args, size_t n);

// The update of a moving-average variable (job/variable.h), in the same single pass: the k
// pushed statistics are summed in order and scaled as gradients are, then
// w_out = decay * w_in + (1 - decay) * that average. lr, t and the slots are not used.
void ApplyMovingAverage(float decay, const UpdateArgs& args);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_OPTIMIZER_H_
