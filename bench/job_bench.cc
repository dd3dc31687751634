#include "bench/job_bench.h"

#include <filesystem>

#include "bench/launched_job.h"
#include "bench/train_bench.h"

namespace towerps::bench {

namespace fs = std::filesystem;

Result<JobBenchResult> RunJobBench(const JobBenchOptions& options) {
  const JobSeries& o = options.jobs;
  TOWERPS_RETURN_IF_ERROR(o.Validate());
  if (!(options.train_seconds > 0)) return InvalidArgumentError("--train-seconds must be > 0");
  TOWERPS_ASSIGN_OR_RETURN(const std::string binary, FindLauncher(o.launcher_binary));
  const SeriesDir dir(o, "towerps_job");
  JobBenchResult r;
  for (int i = 0; i < o.repeat; ++i) {
    const std::string run = "run " + std::to_string(i + 1) + "/" + std::to_string(o.repeat);
    for (const std::string transport : {"tcp", "shm"}) {
      std::vector<std::string> args = o.SyncJobArgs();
      args.insert(args.end(), {"--transport", transport});
      TOWERPS_ASSIGN_OR_RETURN(
          const double eps,
          RunLaunchedJob(binary, args, dir.path() / (transport + std::to_string(i)), o.job_timeout,
                         "with --transport " + transport));
      (transport == "tcp" ? r.tcp : r.shm).push_back(eps);
      o.Say(run + ", job over " + transport + ": " + std::to_string(static_cast<long>(eps)) +
            " examples/s");
    }
    TrainBenchOptions t;
    t.model = o.model;
    t.intra_op_threads = o.workers;
    t.seconds = options.train_seconds;
    TOWERPS_ASSIGN_OR_RETURN(TrainBenchResult single, RunTrainBench(t));
    r.single.push_back(single.examples_per_second);
    o.Say(run + ", one process with " + std::to_string(o.workers) + " threads: " +
          std::to_string(static_cast<long>(single.examples_per_second)) + " examples/s");
  }
  r.tcp_median = Median(r.tcp);
  r.shm_median = Median(r.shm);
  r.single_median = Median(r.single);
  return r;
}

}  // namespace towerps::bench
