#include "launch/local_launcher.h"

#include <filesystem>
#include <fstream>

#include "common/parse.h"
#include "common/transport.h"
#include "launch/gpus.h"
#include "launch/job_supervisor.h"
#include "launch/local_checks.h"
#include "launch/process_group.h"

namespace towerps::launch {
namespace {

namespace fs = std::filesystem;

}  // namespace

LocalLauncher::LocalLauncher(LaunchOptions options)
    : options_(std::move(options)),
      run_dir_(options_.run_dir.empty() ? DefaultRunDir() : options_.run_dir) {
  options_.all_local = true;
}

Status LocalLauncher::Run() {
  TOWERPS_RETURN_IF_ERROR(ValidateLaunchOptions(options_));
  TOWERPS_RETURN_IF_ERROR(CheckLocalJob(options_));
  const LaunchOptions& o = options_;
  TOWERPS_RETURN_IF_ERROR(CreateRunDir(run_dir_));
  TOWERPS_ASSIGN_OR_RETURN(const std::string secret, PrepareJobSecret(o, run_dir_));
  // Every process proves it belongs to the job with this file (docs/SECURITY.md).
  const std::vector<std::string> secret_env =
      secret.empty() ? std::vector<std::string>{}
                     : std::vector<std::string>{"TOWERPS_SECRET_FILE=" + secret};
  std::error_code ec;

  ProcessGroup group(run_dir_);
  if (o.job_progress_bar) group.EnableProgress("worker:0", ExamplesPerChiefStep(o.job));
  JobSupervisor supervisor(&group, o.grace, o.interrupt);
  std::ofstream table((fs::path(run_dir_) / "processes.txt").string());

  // Servers first; each reports its endpoint through a ready file. Replicas must know each
  // other's endpoints from the start: their ports are chosen here.
  const int servers = o.job.ServerProcesses();
  std::vector<int> ports(static_cast<size_t>(servers), 0);
  std::vector<std::string> peers;
  if (o.job.ps_replicas > 1) {
    if (o.base_port > 0) {
      for (int r = 0; r < servers; ++r) ports[r] = o.base_port + r;
    } else {
      TOWERPS_ASSIGN_OR_RETURN(ports, PickFreePorts(servers));
    }
    const bool any = o.bind == "0.0.0.0" || o.bind == "*";
    for (int p : ports) peers.push_back(TcpEndpoint(any ? "127.0.0.1" : o.bind, p));
  }
  std::vector<std::string> ready_files;
  for (int r = 0; r < servers; ++r) {
    const std::string ready =
        (fs::path(run_dir_) / ("ps-" + std::to_string(r) + ".endpoint")).string();
    fs::remove(ready, ec);
    std::vector<std::string> argv =
        ServerArgv(o, r, o.base_port ? o.base_port + r : ports[r], peers);
    argv.insert(argv.end(), {"--ready-file", ready});
    TOWERPS_ASSIGN_OR_RETURN(size_t i, group.Start("ps:" + std::to_string(r), argv, secret_env));
    table << "ps " << r << " pid " << group.pid(i) << " log " << group.LogPath(i) << "\n";
    ready_files.push_back(ready);
  }
  table.flush();

  std::vector<std::string> endpoints;
  const Deadline startup = Deadline::After(o.startup_timeout);
  for (int r = 0; r < servers; ++r) {
    while (!fs::exists(ready_files[r])) {
      if (supervisor.interrupted()) return supervisor.Cancel();
      TOWERPS_RETURN_IF_ERROR(supervisor.CheckNoneExited("while starting"));
      if (startup.expired()) return supervisor.Fail(r, "did not start listening in time");
      group.Pump(Deadline::After(std::chrono::milliseconds(20)));
    }
    std::string endpoint;
    std::ifstream(ready_files[r]) >> endpoint;
    // A restarted server must come back where the workers look for it: on this port.
    TOWERPS_ASSIGN_OR_RETURN(const int64_t port,
                             ParseIntInRange(endpoint.substr(endpoint.rfind(':') + 1),
                                             "server endpoint port", 1, 65535));
    std::vector<std::string> again = ServerArgv(o, r, static_cast<int>(port), peers);
    again.insert(again.end(), {"--ready-file", ready_files[r]});
    group.SetArgv(static_cast<size_t>(r), std::move(again));
    // A server bound to every interface is reached over loopback here.
    const std::string any = "tcp://0.0.0.0:";
    if (endpoint.rfind(any, 0) == 0) endpoint = "tcp://127.0.0.1:" + endpoint.substr(any.size());
    endpoints.push_back(endpoint);
  }

  const size_t first_worker = group.size();
  for (int w = 0; w < o.job.workers; ++w) {
    std::vector<std::string> env = secret_env;
    if (const std::string gpu = GpusForRank(w, GpusNeeded(o.worker.towers)); !gpu.empty())
      env.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
    TOWERPS_ASSIGN_OR_RETURN(
        size_t i, group.Start("worker:" + std::to_string(w), WorkerArgv(o, w, endpoints), env));
    table << "worker " << w << " pid " << group.pid(i) << " log " << group.LogPath(i) << "\n";
  }
  table.flush();
  supervisor.SetRestartPolicy(MakeRestartPolicy(o, run_dir_, /*workers_local=*/true));
  TOWERPS_RETURN_IF_ERROR(supervisor.RunToCompletion(first_worker));
  std::map<std::string, int> restarts;
  for (const auto& [i, n] : supervisor.restarts()) restarts[group.tag(i)] = n;
  return RecordRestartsInSummary(o, restarts);
}

}  // namespace towerps::launch
