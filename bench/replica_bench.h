// towerps-bench replicas: what --ps-replicas 2 costs the main job. Runs the same towerps-launch
// job (sync, Fashion-MNIST) with one and with two replicas of every chunk, alternating, `repeat`
// times each, and reports each side's median examples/s (the chief's summary) and their ratio.
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

#include "towerps/result.h"

namespace towerps::bench {

struct ReplicaBenchOptions {
  std::string launcher_binary;  // empty: towerps-launch beside this binary
  std::string model = "mlp";
  int servers = 1;
  int workers = 2;
  int64_t steps = 600;
  int repeat = 3;
  std::string run_dir;  // empty: a fresh directory under the system's temporary directory
  std::chrono::seconds job_timeout{600};
  std::vector<std::string> extra_args;  // more towerps-launch options, for both sides
  std::function<void(const std::string&)> progress;
};

struct ReplicaBenchResult {
  std::vector<double> single;      // examples/s per run, --ps-replicas 1
  std::vector<double> replicated;  // --ps-replicas 2
  double single_median = 0, replicated_median = 0;
  double ratio = 0;  // replicated / single
};

Result<ReplicaBenchResult> RunReplicaBench(const ReplicaBenchOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_REPLICA_BENCH_H_
