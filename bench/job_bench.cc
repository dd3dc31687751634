#include "bench/job_bench.h"

#include <unistd.h>

#include <filesystem>

#include "bench/launched_job.h"
#include "bench/train_bench.h"

namespace towerps::bench {

namespace fs = std::filesystem;

Result<JobBenchResult> RunJobBench(const JobBenchOptions& o) {
  if (o.repeat < 1 || o.steps < 1 || o.servers < 1 || o.workers < 1 || !(o.train_seconds > 0)) {
    return InvalidArgumentError(
        "--repeat, --steps, --servers and --workers must be at least 1, --train-seconds > 0");
  }
  TOWERPS_ASSIGN_OR_RETURN(const std::string binary, FindLauncher(o.launcher_binary));
  const fs::path root =
      o.run_dir.empty() ? fs::temp_directory_path() / ("towerps_job_" + std::to_string(getpid()))
                        : fs::path(o.run_dir);
  // The jobs' directories go when this returns, on errors too, unless --run-dir keeps them.
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      if (!dir.empty()) fs::remove_all(dir, ec);
    }
  } cleanup{o.run_dir.empty() ? root : fs::path()};
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  JobBenchResult r;
  for (int i = 0; i < o.repeat; ++i) {
    const std::string run = "run " + std::to_string(i + 1) + "/" + std::to_string(o.repeat);
    for (const std::string transport : {"tcp", "shm"}) {
      const std::vector<std::string> args = {"--servers",   std::to_string(o.servers),
                                             "--workers",   std::to_string(o.workers),
                                             "--mode",      "sync",
                                             "--model",     o.model,
                                             "--max-steps", std::to_string(o.steps),
                                             "--transport", transport};
      TOWERPS_ASSIGN_OR_RETURN(const double eps,
                               RunLaunchedJob(binary, args, root / (transport + std::to_string(i)),
                                              o.job_timeout, "with --transport " + transport));
      (transport == "tcp" ? r.tcp : r.shm).push_back(eps);
      say(run + ", job over " + transport + ": " + std::to_string(static_cast<long>(eps)) +
          " examples/s");
    }
    TrainBenchOptions t;
    t.model = o.model;
    t.intra_op_threads = o.workers;
    t.seconds = o.train_seconds;
    TOWERPS_ASSIGN_OR_RETURN(TrainBenchResult single, RunTrainBench(t));
    r.single.push_back(single.examples_per_second);
    say(run + ", one process with " + std::to_string(o.workers) + " threads: " +
        std::to_string(static_cast<long>(single.examples_per_second)) + " examples/s");
  }
  r.tcp_median = Median(r.tcp);
  r.shm_median = Median(r.shm);
  r.single_median = Median(r.single);
  return r;
}

}  // namespace towerps::bench
