// What the chunk suites share: random gradients of kN floats, an SGD job at lr 0.5 with a
// constant schedule, and the spec of the one chunk they test.
#ifndef TOWERPS_TESTS_PS_CHUNK_TEST_UTIL_H_
#define TOWERPS_TESTS_PS_CHUNK_TEST_UTIL_H_

#include <cstdint>
#include <random>

#include "common/tensor.h"
#include "job/job_config.h"
#include "job/placement.h"

namespace towerps::ps {

inline constexpr int64_t kN = 1000;

inline Tensor Random(uint32_t seed) {
  Tensor t = Tensor::Empty({kN});
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < kN; ++i) t.f32()[i] = d(rng);
  return t;
}

inline JobConfig Sgd(UpdateMode mode, int workers) {
  JobConfig c;
  c.mode = mode;
  c.workers = workers;
  c.optimizer.kind = OptimizerKind::kSgd;
  c.optimizer.learning_rate = 0.5f;
  c.schedule.kind = LrScheduleKind::kConstant;
  // Every update at the rate given, whatever the mode: these tests count on lr 0.5 itself
  // (--lr-scaling share is tested against this in update_rule_trace_test.cc).
  c.lr_scaling = LrScaling::kNone;
  return c;
}

inline ChunkSpec Spec() { return {0, 0, 0, kN, kN * 4, 0}; }

}  // namespace towerps::ps

#endif  // TOWERPS_TESTS_PS_CHUNK_TEST_UTIL_H_
