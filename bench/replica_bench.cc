#include "bench/replica_bench.h"

#include <filesystem>

#include "bench/launched_job.h"

namespace towerps::bench {

namespace fs = std::filesystem;

Result<ReplicaBenchResult> RunReplicaBench(const ReplicaBenchOptions& options) {
  const JobSeries& o = options.jobs;
  TOWERPS_RETURN_IF_ERROR(o.Validate());
  TOWERPS_ASSIGN_OR_RETURN(const std::string binary, FindLauncher(o.launcher_binary));
  const SeriesDir root(o, "towerps_replicas");
  ReplicaBenchResult r;
  for (int i = 0; i < o.repeat; ++i) {
    for (int replicas : {1, 2}) {
      const fs::path dir = root.path() / ("r" + std::to_string(replicas) + "-" + std::to_string(i));
      std::vector<std::string> args = o.SyncJobArgs();
      args.insert(args.end(), {"--ps-replicas", std::to_string(replicas)});
      args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
      TOWERPS_ASSIGN_OR_RETURN(const double eps,
                               RunLaunchedJob(binary, args, dir, o.job_timeout,
                                              "with --ps-replicas " + std::to_string(replicas)));
      (replicas == 1 ? r.single : r.replicated).push_back(eps);
      o.Say("run " + std::to_string(i + 1) + "/" + std::to_string(o.repeat) + ", --ps-replicas " +
            std::to_string(replicas) + ": " + std::to_string(static_cast<long>(eps)) +
            " examples/s");
    }
  }
  r.single_median = Median(r.single);
  r.replicated_median = Median(r.replicated);
  r.ratio = MedianRatio(r.replicated, r.single);
  return r;
}

}  // namespace towerps::bench
