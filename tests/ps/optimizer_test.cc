// Each optimizer against its formula evaluated in double precision, over several steps, with
// three averaged gradients and weight decay; and the learning-rate schedules.
#include "ps/server/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace towerps::ps {
namespace {

struct Reference {
  std::vector<double> w, s0, s1;
};

// The documented formulas, in double.
void ReferenceStep(const OptimizerOptions& o, double lr, int64_t t,
                   const std::vector<std::vector<float>>& grads, Reference* r) {
  for (size_t i = 0; i < r->w.size(); ++i) {
    double g = 0;
    for (const auto& gr : grads) g += gr[i];
    g = g / grads.size() + o.weight_decay * r->w[i];
    switch (o.kind) {
      case OptimizerKind::kSgd:
        r->w[i] -= lr * g;
        break;
      case OptimizerKind::kMomentum: {
        const double gained = o.velocity_gain * g;
        r->s0[i] = o.momentum * r->s0[i] + gained;
        r->w[i] -= lr * (o.nesterov ? gained + o.momentum * r->s0[i] : r->s0[i]);
        break;
      }
      case OptimizerKind::kAdam: {
        r->s0[i] = o.beta1 * r->s0[i] + (1 - o.beta1) * g;
        r->s1[i] = o.beta2 * r->s1[i] + (1 - o.beta2) * g * g;
        const double lr_t = lr * std::sqrt(1 - std::pow(o.beta2, t)) / (1 - std::pow(o.beta1, t));
        r->w[i] -= lr_t * r->s0[i] / (std::sqrt(r->s1[i]) + o.epsilon);
        break;
      }
      case OptimizerKind::kAdagrad: {
        r->s0[i] += g * g;
        r->w[i] -= lr * g / std::sqrt(r->s0[i]);
        break;
      }
    }
  }
}

// (kind, Nesterov, velocity gain: a stale mode's, JobConfig::UpdateOptimizer).
class OptimizerTest : public ::testing::TestWithParam<std::tuple<OptimizerKind, bool, float>> {};

TEST_P(OptimizerTest, MatchesDoubleReferenceOverSteps) {
  OptimizerOptions o;
  o.kind = std::get<0>(GetParam());
  o.nesterov = std::get<1>(GetParam());
  o.velocity_gain = std::get<2>(GetParam());
  if (o.velocity_gain != 1.0f) o.momentum = 0.15f;  // async with 4 workers
  o.learning_rate = 0.05f;
  o.weight_decay = 0.01f;
  const int64_t n = 257;
  std::mt19937 rng(static_cast<uint32_t>(o.kind) * 10 + o.nesterov);
  std::normal_distribution<float> dist;
  std::vector<float> w(n), s0(n, OptimizerSlotInitialValue(o)), s1(n, 0.0f);
  for (float& x : w) x = dist(rng);
  Reference ref{std::vector<double>(w.begin(), w.end()), std::vector<double>(s0.begin(), s0.end()),
                std::vector<double>(n, 0.0)};
  for (int64_t t = 1; t <= 6; ++t) {
    std::vector<std::vector<float>> grads(3, std::vector<float>(n));
    for (auto& g : grads) {
      for (float& x : g) x = dist(rng);
    }
    const float* ptrs[] = {grads[0].data(), grads[1].data(), grads[2].data()};
    UpdateArgs a;
    a.grads = ptrs;
    a.k = 3;
    a.scale = 1.0f / 3.0f;
    a.w_in = w.data();
    a.w_out = w.data();
    a.slot0 = s0.data();
    a.slot1 = s1.data();
    a.n = n;
    a.lr = o.learning_rate;
    a.t = t;
    ApplyUpdate(o, a);
    ReferenceStep(o, o.learning_rate, t, grads, &ref);
  }
  double max_err = 0;
  for (int64_t i = 0; i < n; ++i) {
    max_err = std::max(max_err, std::fabs(w[i] - ref.w[i]) / (1 + std::fabs(ref.w[i])));
  }
  EXPECT_LT(max_err, 2e-5) << kOptimizerKinds.Name(o.kind);
  // The update did something: an untouched w would fail the comparison above only if it
  // happened to equal the reference, so also check it moved.
  EXPECT_GT(std::fabs(ref.w[0] - static_cast<double>(w[0]) + 1e-3), 0);
}

INSTANTIATE_TEST_SUITE_P(All, OptimizerTest,
                         ::testing::Values(std::make_tuple(OptimizerKind::kSgd, false, 1.0f),
                                           std::make_tuple(OptimizerKind::kMomentum, false, 1.0f),
                                           std::make_tuple(OptimizerKind::kMomentum, true, 1.0f),
                                           std::make_tuple(OptimizerKind::kMomentum, false, 8.5f),
                                           std::make_tuple(OptimizerKind::kMomentum, true, 8.5f),
                                           std::make_tuple(OptimizerKind::kAdam, false, 1.0f),
                                           std::make_tuple(OptimizerKind::kAdagrad, false, 1.0f)));

TEST(OptimizerTest, OutOfPlaceEqualsInPlace) {
  OptimizerOptions o;
  o.kind = OptimizerKind::kMomentum;
  std::vector<float> w = {1, 2, 3, 4}, w2 = w, out(4), g = {0.5f, -1, 2, 0.25f};
  std::vector<float> v1(4, 0.0f), v2(4, 0.0f);
  const float* gp[] = {g.data()};
  UpdateArgs a;
  a.grads = gp;
  a.n = 4;
  a.lr = 0.1f;
  a.w_in = w.data();
  a.w_out = w.data();
  a.slot0 = v1.data();
  ApplyUpdate(o, a);
  a.w_in = w2.data();
  a.w_out = out.data();
  a.slot0 = v2.data();
  ApplyUpdate(o, a);
  EXPECT_EQ(w, out);
  EXPECT_EQ(w2, (std::vector<float>{1, 2, 3, 4}));  // input untouched
}

TEST(LearningRateTest, Schedules) {
  OptimizerOptions o;
  o.learning_rate = 1.0f;
  LrScheduleOptions s;
  s.kind = LrScheduleKind::kConstant;
  EXPECT_FLOAT_EQ(LearningRateAt(o, s, 12345), 1.0f);
  s.kind = LrScheduleKind::kStep;
  s.decay_rate = 0.5f;
  s.decay_steps = 10;
  EXPECT_FLOAT_EQ(LearningRateAt(o, s, 9), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, s, 10), 0.5f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, s, 25), 0.25f);
  s.kind = LrScheduleKind::kExponential;
  EXPECT_NEAR(LearningRateAt(o, s, 5), std::pow(0.5, 0.5), 1e-6);
  s.staircase = true;
  EXPECT_FLOAT_EQ(LearningRateAt(o, s, 5), 1.0f);
  s.warmup_steps = 4;
  EXPECT_FLOAT_EQ(LearningRateAt(o, s, 0), 0.25f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, s, 3), 1.0f);
  EXPECT_FLOAT_EQ(LearningRateAt(o, s, 14), 0.5f);  // decay counts from the end of warm-up
}

}  // namespace
}  // namespace towerps::ps
