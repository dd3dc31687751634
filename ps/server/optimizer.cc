#include "ps/server/optimizer.h"

#include <cmath>

#include "towerps/check.h"

namespace towerps::ps {
namespace {

// The averaged, weight-decayed gradient at i. K > 0 fixes the number of gradients at compile
// time so the sum unrolls and the loop vectorises; K == 0 reads it from the arguments.
template <int K>
inline float Gradient(const UpdateArgs& a, float wd, float w, int64_t i) {
  const int k = K > 0 ? K : a.k;
  float g = a.grads[0][i];
  for (int j = 1; j < k; ++j) g += a.grads[j][i];
  return g * a.scale + wd * w;
}

template <int K>
void Apply(const OptimizerOptions& o, const UpdateArgs& a) {
  const float lr = a.lr;
  const float wd = o.weight_decay;
  const float* w_in = a.w_in;  // may equal w_out: no __restrict on this pair
  float* w_out = a.w_out;
  switch (o.kind) {
    case OptimizerKind::kSgd:
      for (int64_t i = 0; i < a.n; ++i) {
        const float w = w_in[i];
        w_out[i] = w - lr * Gradient<K>(a, wd, w, i);
      }
      return;
    case OptimizerKind::kMomentum: {
      const float m = o.momentum;
      float* __restrict v = a.slot0;
      if (o.velocity_gain != 1.0f) {  // a separate loop: gain 1 keeps its bits exactly
        const float gain = o.velocity_gain;
        for (int64_t i = 0; i < a.n; ++i) {
          const float w = w_in[i];
          const float g = gain * Gradient<K>(a, wd, w, i);
          const float vi = m * v[i] + g;
          v[i] = vi;
          w_out[i] = w - lr * (o.nesterov ? g + m * vi : vi);
        }
        return;
      }
      for (int64_t i = 0; i < a.n; ++i) {
        const float w = w_in[i];
        const float g = Gradient<K>(a, wd, w, i);
        const float vi = m * v[i] + g;
        v[i] = vi;
        w_out[i] = w - lr * (o.nesterov ? g + m * vi : vi);
      }
      return;
    }
    case OptimizerKind::kAdam: {
      const double t = static_cast<double>(a.t);
      const float lr_t = static_cast<float>(lr * std::sqrt(1.0 - std::pow(o.beta2, t)) /
                                            (1.0 - std::pow(o.beta1, t)));
      const float b1 = o.beta1, b2 = o.beta2, eps = o.epsilon;
      float* __restrict m = a.slot0;
      float* __restrict v = a.slot1;
      // Two passes, each simple enough for the compiler to vectorise (one pass with six
      // streams stayed scalar): the moments, then the weights from them. Each element's
      // arithmetic is the one pass's, so are its bits; w_in[i] is read before w_out[i] is written.
      for (int64_t i = 0; i < a.n; ++i) {
        const float g = Gradient<K>(a, wd, w_in[i], i);
        m[i] = b1 * m[i] + (1.0f - b1) * g;
        v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      }
      for (int64_t i = 0; i < a.n; ++i) {
        w_out[i] = w_in[i] - lr_t * m[i] / (std::sqrt(v[i]) + eps);
      }
      return;
    }
    case OptimizerKind::kAdagrad: {
      float* __restrict acc = a.slot0;
      for (int64_t i = 0; i < a.n; ++i) {
        const float w = w_in[i];
        const float g = Gradient<K>(a, wd, w, i);
        const float ai = acc[i] + g * g;
        acc[i] = ai;
        w_out[i] = w - lr * g / std::sqrt(ai);
      }
      return;
    }
  }
}

}  // namespace

int OptimizerSlots(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::kSgd:
      return 0;
    case OptimizerKind::kMomentum:
      return 1;
    case OptimizerKind::kAdam:
      return 2;
    case OptimizerKind::kAdagrad:
      return 1;
  }
  return 0;
}

float OptimizerSlotInitialValue(const OptimizerOptions& options) {
  return options.kind == OptimizerKind::kAdagrad ? options.initial_accumulator : 0.0f;
}

float LearningRateAt(const OptimizerOptions& optimizer, const LrScheduleOptions& schedule,
                     int64_t updates_done) {
  double lr = optimizer.learning_rate;
  const int64_t t = updates_done;
  if (schedule.warmup_steps > 0 && t < schedule.warmup_steps) {
    return static_cast<float>(lr * static_cast<double>(t + 1) / schedule.warmup_steps);
  }
  const int64_t after = t - schedule.warmup_steps;
  const double intervals = static_cast<double>(after) / static_cast<double>(schedule.decay_steps);
  switch (schedule.kind) {
    case LrScheduleKind::kConstant:
      break;
    case LrScheduleKind::kStep:
      lr *= std::pow(schedule.decay_rate, std::floor(intervals));
      break;
    case LrScheduleKind::kExponential:
      lr *= std::pow(schedule.decay_rate, schedule.staircase ? std::floor(intervals) : intervals);
      break;
  }
  return static_cast<float>(lr);
}

void ApplyUpdate(const OptimizerOptions& o, const UpdateArgs& a) {
  TOWERPS_CHECK(a.k >= 1 && a.grads != nullptr);
  switch (a.k) {
    case 1:
      return Apply<1>(o, a);
    case 2:
      return Apply<2>(o, a);
    case 3:
      return Apply<3>(o, a);
    case 4:
      return Apply<4>(o, a);
    case 8:
      return Apply<8>(o, a);
    default:
      return Apply<0>(o, a);
  }
}

void ApplyUpdates(const OptimizerOptions& o, const UpdateArgs* a, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (a[i].k == 1 && a[i].grads != nullptr) {
      Apply<1>(o, a[i]);
    } else {
      ApplyUpdate(o, a[i]);
    }
  }
}

void ApplyMovingAverage(float decay, const UpdateArgs& a) {
  TOWERPS_CHECK(a.k >= 1 && a.grads != nullptr);
  const float keep = decay, take = 1.0f - decay;
  for (int64_t i = 0; i < a.n; ++i) {
    const float statistic = Gradient<0>(a, 0.0f, 0.0f, i);  // summed in order, scaled
    a.w_out[i] = keep * a.w_in[i] + take * statistic;
  }
}

}  // namespace towerps::ps
