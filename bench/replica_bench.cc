#include "bench/replica_bench.h"

#include <unistd.h>

#include <filesystem>

#include "bench/launched_job.h"

namespace towerps::bench {

namespace fs = std::filesystem;

Result<ReplicaBenchResult> RunReplicaBench(const ReplicaBenchOptions& o) {
  if (o.repeat < 1 || o.steps < 1 || o.servers < 1 || o.workers < 1) {
    return InvalidArgumentError("--repeat, --steps, --servers and --workers must be at least 1");
  }
  TOWERPS_ASSIGN_OR_RETURN(const std::string binary, FindLauncher(o.launcher_binary));
  const fs::path root = o.run_dir.empty() ? fs::temp_directory_path() /
                                                ("towerps_replicas_" + std::to_string(getpid()))
                                          : fs::path(o.run_dir);
  ReplicaBenchResult r;
  for (int i = 0; i < o.repeat; ++i) {
    for (int replicas : {1, 2}) {
      const fs::path dir = root / ("r" + std::to_string(replicas) + "-" + std::to_string(i));
      std::vector<std::string> args = {"--servers",     std::to_string(o.servers),
                                       "--workers",     std::to_string(o.workers),
                                       "--mode",        "sync",
                                       "--model",       o.model,
                                       "--max-steps",   std::to_string(o.steps),
                                       "--ps-replicas", std::to_string(replicas)};
      args.insert(args.end(), o.extra_args.begin(), o.extra_args.end());
      TOWERPS_ASSIGN_OR_RETURN(const double eps,
                               RunLaunchedJob(binary, args, dir, o.job_timeout,
                                              "with --ps-replicas " + std::to_string(replicas)));
      (replicas == 1 ? r.single : r.replicated).push_back(eps);
      if (o.progress) {
        o.progress("run " + std::to_string(i + 1) + "/" + std::to_string(o.repeat) +
                   ", --ps-replicas " + std::to_string(replicas) + ": " +
                   std::to_string(static_cast<long>(eps)) + " examples/s");
      }
    }
  }
  r.single_median = Median(r.single);
  r.replicated_median = Median(r.replicated);
  r.ratio = r.replicated_median / r.single_median;
  if (o.run_dir.empty()) {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  return r;
}

}  // namespace towerps::bench
