// FinishedWorkers: the workers that left a job, each with the steps it did. In sync, where every
// step takes a gradient from every worker (no backup workers), a step past a finished worker's
// last one can never complete: a pull for it would wait forever, and is answered instead with
// WhyUnreachable's error, which names the worker and says what to change.
//
// Contract: owned and used by one shard, on its thread; not thread-safe.
#ifndef TOWERPS_PS_SERVER_FINISHED_WORKERS_H_
#define TOWERPS_PS_SERVER_FINISHED_WORKERS_H_

#include <cstdint>
#include <map>
#include <string>

#include "job/job_config.h"

namespace towerps::ps {

class FinishedWorkers {
 public:
  explicit FinishedWorkers(const JobConfig& config)
      : every_step_takes_all_(config.mode == UpdateMode::kSync &&
                              config.EffectiveReplicas() >= config.workers) {}

  // Worker `worker` left after `steps` steps (a second call replaces the first).
  void Add(int worker, int64_t steps) { steps_[worker] = steps; }

  // Why a pull for `version` can never be served, naming the worker; empty if it may be.
  std::string WhyUnreachable(int64_t version) const {
    if (!every_step_takes_all_) return {};
    for (const auto& [worker, steps] : steps_) {
      if (version <= steps) continue;
      return "worker " + std::to_string(worker) + " finished at step " + std::to_string(steps) +
             "; step " + std::to_string(steps + 1) +
             " cannot complete without it (a sync step takes a gradient from every worker: give "
             "every worker the same number of steps, or let a step take fewer gradients with "
             "--replicas-to-aggregate)";
    }
    return {};
  }

 private:
  const bool every_step_takes_all_;
  std::map<int, int64_t> steps_;  // worker -> the steps it did before it left
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_FINISHED_WORKERS_H_
