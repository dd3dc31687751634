// towerps-bench replicas: what --ps-replicas 2 costs the main job. Runs the same towerps-launch
// job (sync, Fashion-MNIST) with one and with two replicas of every chunk, alternating, `repeat`
// times each, and reports each side's median examples/s (the chief's summary) and the median of
// the rounds' ratios.
// Alternating in one invocation keeps a noisy machine's drift out of the ratio.
//
// Contract: RunReplicaBench blocks until every job ended; each job is bounded by `job_timeout`
// and killed past it; a failed job is an error naming its log. Reports progress through
// `progress` (may be empty). Not thread-safe.
#ifndef TOWERPS_BENCH_REPLICA_BENCH_H_
#define TOWERPS_BENCH_REPLICA_BENCH_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "bench/launched_job.h"
#include "towerps/result.h"

namespace towerps::bench {

struct ReplicaBenchOptions {
  JobSeries jobs;
  std::vector<std::string> extra_args;  // more towerps-launch options, for both sides
};

struct ReplicaBenchResult {
  std::vector<double> single;      // examples/s per run, --ps-replicas 1
  std::vector<double> replicated;  // --ps-replicas 2
  double single_median = 0, replicated_median = 0;
  double ratio = 0;  // replicated / single: the median of the rounds' ratios (MedianRatio)
};

Result<ReplicaBenchResult> RunReplicaBench(const ReplicaBenchOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_REPLICA_BENCH_H_
