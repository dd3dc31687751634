// towerps-bench job: the main job against single-process training on the same cores. Runs the
// towerps-launch job (1 server, 2 workers, sync, Fashion-MNIST by default) over --transport tcp
// and shm (or one of them), and `towerps-bench train` in this process with as many intra-op
// threads as the job has workers (or `single_threads`), at the job's global batch when
// jobs.batch_size is given (else train's 64), alternating
// `repeat` times; reports each round's figures and ratios, and the medians. The jobs should stop
// before the first epoch's evaluation (steps < one epoch), which single-process training does
// not do either. With a click model and its data (--dataset criteo --data-dir) this is the
// recommendation issue's comparison: the job against one process holding its tables locally.
// The one process trains with train's optimizers (momentum on the dense layers, Adagrad on the
// tables), the job with the model's recommended ones (a click model's: Adam and Adagrad), and
// it reads the data its model's kind implies (a table model: criteo), whatever --dataset says.
//
// Contract: blocks until every run ended; each job is bounded by `job_timeout`; a failed job is
// an error naming its log. Not thread-safe.
#ifndef TOWERPS_BENCH_JOB_BENCH_H_
#define TOWERPS_BENCH_JOB_BENCH_H_

#include <string>
#include <vector>

#include "bench/launched_job.h"
#include "towerps/result.h"

namespace towerps::bench {

struct JobBenchOptions {
  JobBenchOptions() { jobs.steps = 400; }  // below the 468 steps of an epoch at batch 64
  JobSeries jobs;
  double train_seconds = 3;  // single-process measurement per repeat
  // The one process's intra-op threads; 0: as many as the job has workers.
  int single_threads = 0;
  // The transports the job runs over, each once a round: "tcp", "shm" or both of them (the
  // command line's --transport both).
  std::vector<std::string> transports = {"tcp", "shm"};
  // More configurations, each run once a round over each transport beside the job as given:
  // the job with these flags too ("--bind-cores"), as one string of words each.
  std::vector<std::string> vs_flags;

  Status Validate() const;
};

struct JobBenchResult {
  std::vector<double> tcp, shm, single;  // examples/s per run; a transport not run: empty
  double tcp_median = 0, shm_median = 0, single_median = 0;
  // Job over one process: the median of the rounds' ratios (MedianRatio).
  double tcp_over_single = 0, shm_over_single = 0;
  struct Vs {  // a configuration of vs_flags over one transport
    std::string flags, transport;
    std::vector<double> runs;
    double median = 0;
    double over_single = 0;  // as tcp_over_single
  };
  std::vector<Vs> vs;
  int single_batch = 0;    // the one process's batch: the job's global batch
  int single_threads = 0;  // and its intra-op threads
};

Result<JobBenchResult> RunJobBench(const JobBenchOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_JOB_BENCH_H_
