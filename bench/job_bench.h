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

#include <vector>

#include "bench/launched_job.h"
#include "towerps/result.h"

namespace towerps::bench {

struct JobBenchOptions {
  JobBenchOptions() { jobs.steps = 400; }  // below the 468 steps of an epoch at batch 64
  JobSeries jobs;
  double train_seconds = 3;  // single-process measurement per repeat
};

struct JobBenchResult {
  std::vector<double> tcp, shm, single;  // examples/s per run
  double tcp_median = 0, shm_median = 0, single_median = 0;
};

Result<JobBenchResult> RunJobBench(const JobBenchOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_JOB_BENCH_H_
