// StragglerPlan: the artificial slow-downs an experiment injects into workers, so that
// sync, backup-worker, async and SSP training can be compared under heterogeneity.
//
//   --straggler RANK:DELAY         worker RANK sleeps DELAY every step (e.g. 1:40ms, 2:0.1s)
//   --straggler-dist exp:MEAN      every worker sleeps an exponential delay of mean MEAN per step
//   --straggler-dist uniform:LO:HI every worker sleeps a uniform delay in [LO, HI] per step
//   --slow-workers K:FACTOR        the last K ranks compute FACTOR times slower (they sleep
//                                  FACTOR - 1 times their own measured compute time)
//
// Random delays are drawn from (seed, rank, step), so a rerun injects the same delays. Durations
// are at most kMaxDelaySeconds and FACTOR at most kMaxSlowFactor, so every delay is one that
// std::this_thread::sleep_for can take.
// Contract: value type; Parse errors name the flag and the bad text.
#ifndef TOWERPS_WORKER_STRAGGLER_H_
#define TOWERPS_WORKER_STRAGGLER_H_

#include <cstdint>
#include <string>

#include "towerps/result.h"

namespace towerps::worker {

inline constexpr double kMaxDelaySeconds = 3600;
inline constexpr double kMaxSlowFactor = 1000;

class StragglerPlan {
 public:
  // Empty strings mean "not set".
  static Result<StragglerPlan> Parse(const std::string& straggler, const std::string& dist,
                                     const std::string& slow_workers, int workers);

  // Extra seconds worker `rank` waits before computing `step`, given the compute time of its
  // previous step (for --slow-workers).
  double DelaySeconds(int rank, int64_t step, uint64_t seed, double last_compute_seconds) const;
  bool empty() const;

 private:
  enum class Dist { kNone, kExponential, kUniform };
  int fixed_rank_ = -1;
  double fixed_seconds_ = 0;
  Dist dist_ = Dist::kNone;
  double a_ = 0, b_ = 0;  // exp: mean; uniform: lo, hi
  int slow_count_ = 0;
  double slow_factor_ = 1;
  int workers_ = 1;
};

// "40ms", "0.04s", "40000us" or a bare number of seconds; at most kMaxDelaySeconds.
Result<double> ParseDuration(const std::string& text, const std::string& flag);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_STRAGGLER_H_
