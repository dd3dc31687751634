#include "launch/command_lines.h"

#include "common/sibling_executable.h"
#include "common/transport.h"
#include "launch/worker_cmd.h"

namespace towerps::launch {

namespace {

// The flags that tell servers and workers how the job is secured (the secret itself travels in
// TOWERPS_SECRET_FILE, never here) and how tensors travel between processes on one host.
std::vector<std::string> SecurityArgs(const LaunchOptions& o) {
  std::vector<std::string> args;
  if (o.insecure) args.push_back("--insecure");
  if (o.encrypt) args.push_back("--encrypt");
  if (o.transport != TransportPath::kAuto) {
    args.insert(args.end(), {"--transport", TransportPathName(o.transport)});
  }
  return args;
}

}  // namespace

std::string ServerBinary(const LaunchOptions& o) {
  return o.server_binary.empty() ? SiblingExecutable("towerps-server") : o.server_binary;
}

std::string WorkerBinary(const LaunchOptions& o) {
  return o.worker_binary.empty() ? SiblingExecutable("towerps-worker") : o.worker_binary;
}

std::vector<std::string> ServerArgv(const LaunchOptions& o, int rank, int port,
                                    const std::vector<std::string>& peers) {
  std::vector<std::string> argv = {ServerBinary(o), "--rank", std::to_string(rank), "--bind",
                                   o.bind,          "--port", std::to_string(port), "--threads",
                                   o.server_threads};
  if (!o.checkpoint_dir.empty()) {
    argv.insert(argv.end(), {"--checkpoint-dir", o.checkpoint_dir, "--checkpoint-every",
                             std::to_string(o.checkpoint_every), "--checkpoint-full-every",
                             std::to_string(o.checkpoint_full_every)});
  }
  if (!o.table_dir.empty()) argv.insert(argv.end(), {"--table-dir", o.table_dir});
  if (o.worker.log_device_placement) argv.push_back("--log-device-placement");
  if (o.shutdown_grace_ms != LaunchOptions::kDefaultShutdownGraceMs) {
    argv.insert(argv.end(), {"--shutdown-grace-ms", std::to_string(o.shutdown_grace_ms)});
  }
  argv.insert(argv.end(), {"--orphan-timeout-ms",
                           o.launcher_stops_servers ? "0" : std::to_string(o.orphan_timeout_ms)});
  argv.insert(argv.end(), {"--log-level", LogLevelName(o.log_level)});
  if (!o.worker.logdir.empty()) argv.insert(argv.end(), {"--logdir", o.worker.logdir});
  if (!peers.empty()) {
    std::string list;
    for (const std::string& p : peers) list += (list.empty() ? "" : ",") + p;
    argv.insert(argv.end(), {"--peers", list});
  }
  const std::vector<std::string> security = SecurityArgs(o);
  argv.insert(argv.end(), security.begin(), security.end());
  const std::vector<std::string> job = o.job.ToArgs();
  argv.insert(argv.end(), job.begin(), job.end());
  return argv;
}

std::vector<std::string> WorkerJobArgs(const LaunchOptions& o) {
  std::vector<std::string> args = SecurityArgs(o);
  args.insert(args.end(), {"--log-level", LogLevelName(o.log_level)});
  const std::vector<std::string> job = o.job.ToArgs();
  args.insert(args.end(), job.begin(), job.end());
  const std::vector<std::string> worker = o.worker.ToArgs();
  args.insert(args.end(), worker.begin(), worker.end());
  args.insert(args.end(), o.worker_binary_args.begin(), o.worker_binary_args.end());
  return args;
}

std::string DistEndpoint(const LaunchOptions& o, const std::string& host, int port) {
  if (!o.worker.dist_endpoint.empty() || o.worker_cmd.empty()) return o.worker.dist_endpoint;
  return TcpEndpoint(host, port);
}

std::vector<std::string> WorkerArgv(const LaunchOptions& o, int rank,
                                    const std::vector<std::string>& endpoints) {
  std::string list;
  for (const std::string& e : endpoints) list += (list.empty() ? "" : ",") + e;
  std::vector<std::string> argv = {WorkerBinary(o), "--rank", std::to_string(rank),
                                   "--ps-endpoints", list};
  const std::vector<std::string> job = WorkerJobArgs(o);
  argv.insert(argv.end(), job.begin(), job.end());
  if (rank == 0 && o.job_progress_bar) argv.push_back("--progress-lines");
  return o.worker_cmd.empty() ? argv : WorkerCmdArgv(o.worker_cmd, o.worker_allocator, argv);
}

int64_t ExamplesPerChiefStep(const ps::JobConfig& job) {
  const int per_step = job.mode == ps::UpdateMode::kSync ? job.EffectiveReplicas() : job.workers;
  return int64_t{job.batch_size} * per_step;
}

}  // namespace towerps::launch
