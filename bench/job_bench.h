// towerps-bench job: the main job against single-process training on the same cores. Runs the
// towerps-launch job (1 server, 2 workers, sync, Fashion-MNIST) over --transport tcp and shm,
// and `towerps-bench train` in this process with as many intra-op threads as the job has
// workers, alternating `repeat` times; reports each median in examples/s and their ratios.
// The jobs stop before the first epoch's evaluation (steps < one epoch), which single-process
// training does not do either.
//
// Contract: blocks until every run ended; each job is bounded by `job_timeout`; a failed job is
// an error naming its log. Not thread-safe.
#ifndef TOWERPS_BENCH_JOB_BENCH_H_
#define TOWERPS_BENCH_JOB_BENCH_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps::bench {

struct JobBenchOptions {
  std::string launcher_binary;  // empty: towerps-launch beside this binary
  std::string model = "mlp";
  int servers = 1;
  int workers = 2;
  int64_t steps = 400;  // per job; below the 468 steps of an epoch at batch 64
  int repeat = 3;
  double train_seconds = 3;  // single-process measurement per repeat
  std::string run_dir;       // empty: a fresh directory under the system's temporary directory
  std::chrono::seconds job_timeout{600};
  std::function<void(const std::string&)> progress;
};

struct JobBenchResult {
  std::vector<double> tcp, shm, single;  // examples/s per run
  double tcp_median = 0, shm_median = 0, single_median = 0;
};

Result<JobBenchResult> RunJobBench(const JobBenchOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_JOB_BENCH_H_
