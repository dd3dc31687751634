#include "bench/replica_bench.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/sibling_executable.h"
#include "common/subprocess.h"

namespace towerps::bench {
namespace {

namespace fs = std::filesystem;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// One job; its chief's examples/s.
Result<double> RunJob(const ReplicaBenchOptions& o, const std::string& binary, int replicas,
                      const fs::path& dir) {
  fs::create_directories(dir);
  const fs::path summary = dir / "summary.json";
  const fs::path log = dir / "launch.log";
  SubprocessOptions so;
  so.argv = {binary,
             "--servers",
             std::to_string(o.servers),
             "--workers",
             std::to_string(o.workers),
             "--mode",
             "sync",
             "--model",
             o.model,
             "--max-steps",
             std::to_string(o.steps),
             "--ps-replicas",
             std::to_string(replicas),
             "--run-dir",
             (dir / "run").string(),
             "--summary-out",
             summary.string()};
  so.argv.insert(so.argv.end(), o.extra_args.begin(), o.extra_args.end());
  so.output_path = log.string();
  TOWERPS_ASSIGN_OR_RETURN(Subprocess job, Subprocess::Start(so));
  const std::optional<int> code = job.Wait(Deadline::After(o.job_timeout));
  if (!code) {
    return TimeoutError("the job with --ps-replicas " + std::to_string(replicas) +
                        " did not end within " + std::to_string(o.job_timeout.count()) +
                        " s; see " + log.string());
  }
  if (*code != 0) {
    return FailedPreconditionError("the job with --ps-replicas " + std::to_string(replicas) +
                                   " exited " + std::to_string(*code) + "; see " + log.string());
  }
  std::ifstream in(summary);
  const nlohmann::json s = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!s.is_object() || !s.contains("examples_per_sec") || !s["examples_per_sec"].is_number()) {
    return CorruptionError("no examples_per_sec in " + summary.string());
  }
  return s["examples_per_sec"].get<double>();
}

}  // namespace

Result<ReplicaBenchResult> RunReplicaBench(const ReplicaBenchOptions& o) {
  if (o.repeat < 1 || o.steps < 1 || o.servers < 1 || o.workers < 1) {
    return InvalidArgumentError("--repeat, --steps, --servers and --workers must be at least 1");
  }
  const std::string binary =
      o.launcher_binary.empty() ? SiblingExecutable("towerps-launch") : o.launcher_binary;
  if (!fs::exists(binary)) {
    return NotFoundError("launcher " + binary + " not found; pass --launcher-bin");
  }
  const fs::path root = o.run_dir.empty() ? fs::temp_directory_path() /
                                                ("towerps_replicas_" + std::to_string(getpid()))
                                          : fs::path(o.run_dir);
  ReplicaBenchResult r;
  for (int i = 0; i < o.repeat; ++i) {
    for (int replicas : {1, 2}) {
      const fs::path dir = root / ("r" + std::to_string(replicas) + "-" + std::to_string(i));
      TOWERPS_ASSIGN_OR_RETURN(const double eps, RunJob(o, binary, replicas, dir));
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
