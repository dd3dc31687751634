#include "launch/launch_options.h"

#include <unistd.h>

#include <filesystem>
#include <tuple>

#include "launch/command_lines.h"
#include "launch/worker_binary.h"
#include "ps/server/server_options.h"
#include "ps/server/server_threads.h"
#include "ps/server/shutdown_gate.h"
#include "worker/straggler.h"

namespace towerps::launch {
namespace {

// A file the chief writes at the end (`flag` `path`): its directory must be there and writable
// now, not found missing after the whole training run.
Status CheckOutputFile(const std::string& flag, const std::string& path) {
  if (path.empty()) return Status::Ok();
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return InvalidArgumentError(flag + " " + path + ": the directory " + dir +
                                " does not exist; create it first, or give another path");
  }
  if (access(dir.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgumentError(flag + " " + path + ": the directory " + dir +
                                " is not writable; give another path");
  }
  return Status::Ok();
}

// The chief's: --summary-out and --export-npz.
Status CheckOutputFiles(const worker::WorkerOptions& w) {
  TOWERPS_RETURN_IF_ERROR(CheckOutputFile("--summary-out", w.summary_out));
  return CheckOutputFile("--export-npz", w.export_npz);
}

}  // namespace

Status ValidateLaunchOptions(const LaunchOptions& o) {
  TOWERPS_RETURN_IF_ERROR(o.job.Validate());
  TOWERPS_RETURN_IF_ERROR(o.worker.Validate());
  TOWERPS_RETURN_IF_ERROR(worker::StragglerPlan::Parse(o.worker.straggler, o.worker.straggler_dist,
                                                       o.worker.slow_workers, o.job.workers)
                              .status());
  if (o.base_port < 0 || o.base_port + o.job.servers > 65536) {
    return InvalidArgumentError("--base-port=" + std::to_string(o.base_port) +
                                " leaves no room for " + std::to_string(o.job.servers) +
                                (o.job.servers == 1 ? " server" : " servers") + " below 65536");
  }
  if (o.base_port > 0 && o.base_port < 1024 && geteuid() != 0) {
    return InvalidArgumentError("--base-port=" + std::to_string(o.base_port) +
                                " needs root; use a port of 1024 or more, or 0 for free ports");
  }
  TOWERPS_RETURN_IF_ERROR(ps::ParseServerThreads(o.server_threads, "--server-threads").status());
  if (!o.worker.ready_file.empty()) {
    return InvalidArgumentError("--ready-file " + o.worker.ready_file +
                                ": that is towerps-worker's own flag (the launcher gives it to "
                                "the workers it restarts); leave it out");
  }
  if (o.checkpoint_full_every < 1) {
    return InvalidArgumentError(
        "--checkpoint-full-every=" + std::to_string(o.checkpoint_full_every) +
        " must be >= 1 (1: every checkpoint is full)");
  }
  if (o.max_restarts < 0) {
    return InvalidArgumentError("--max-restarts=" + std::to_string(o.max_restarts) +
                                " must be 0 (a dead worker ends the job) or more");
  }
  if (o.restart_timeout.count() <= 0 || o.restart_timeout >= o.worker.rpc_timeout) {
    return InvalidArgumentError(
        "--restart-timeout=" + std::to_string(o.restart_timeout.count() / 1000) +
        " s must be positive and shorter than --rpc-timeout-ms=" +
        std::to_string(o.worker.rpc_timeout.count()) +
        ": the other workers wait at most that long for a restarted one");
  }
  if (!o.worker_cmd.empty() && !o.worker_binary.empty()) {
    return InvalidArgumentError("--worker-cmd and --worker-bin " + o.worker_binary +
                                " both name the workers' program; give one");
  }
  TOWERPS_RETURN_IF_ERROR(ps::CheckShutdownGrace(o.shutdown_grace_ms));
  TOWERPS_RETURN_IF_ERROR(ps::CheckOrphanTimeout(o.orphan_timeout_ms));
  if (o.all_local || o.table_dir.empty()) {  // elsewhere each server checks its own
    ps::ServerOptions tier;
    tier.job = o.job;
    tier.table_dir = o.table_dir;
    TOWERPS_RETURN_IF_ERROR(tier.ValidateTableDir());
  }
  if (o.all_local) TOWERPS_RETURN_IF_ERROR(CheckOutputFiles(o.worker));  // elsewhere: other dirs
  const bool worker_cmd = !o.worker_cmd.empty();
  if (worker_cmd && o.worker.profile_steps > 0) {
    return InvalidArgumentError(
        "--profile-steps " + std::to_string(o.worker.profile_steps) +
        " profiles native workers' steps; a --worker-cmd script's are its own (torch.profiler)");
  }
  if (worker_cmd && o.worker.bucket_bytes != worker::WorkerOptions{}.bucket_bytes) {
    return InvalidArgumentError(
        "--bucket-cap-mb sets native workers' gradient buckets; a --worker-cmd script sets its "
        "own: tps.DistributedOptimizer(..., bucket_cap_mb=M)");
  }
  for (const auto& [flag, given, path] :
       {std::tuple<std::string, bool, std::string>{"--server-bin", !o.server_binary.empty(),
                                                   ServerBinary(o)},
        {"--worker-bin", !o.worker_binary.empty(), worker_cmd ? "" : WorkerBinary(o)}}) {
    if (path.empty()) continue;  // --worker-cmd: no worker binary
    if (access(path.c_str(), X_OK) == 0) continue;
    // Named by the user: their path is wrong. Not named: the default beside this one is missing.
    return NotFoundError(given ? flag + " " + path + " is not an executable file; check the path"
                               : path + " is not an executable (the default " + flag +
                                     ", beside towerps-launch); build it or pass " + flag);
  }
  // A script cannot be asked --check-job: its model and data are its own, and it checks the
  // job's options itself when it calls tps.init(). The servers, ports and secret are checked
  // here all the same.
  if (worker_cmd) return Status::Ok();
  // The model and the data must fit each other: refused here, before any process starts, by
  // the worker binary that will train them (it knows its own models and datasets).
  return CheckJobWithWorkerBinary(o);
}

}  // namespace towerps::launch
