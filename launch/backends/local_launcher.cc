#include "launch/backends/local_launcher.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/logging.h"
#include "common/parse.h"
#include "common/transport.h"
#include "launch/command_lines.h"
#include "launch/gpus.h"
#include "launch/job_record.h"
#include "launch/job_supervisor.h"
#include "launch/launch_flags.h"
#include "launch/local_checks.h"
#include "launch/process_group.h"
#include "ps/server/server_threads.h"

namespace towerps::launch {
namespace {

namespace fs = std::filesystem;

// Workers that share a GPU and were given no memory share split it (SharedGpuFraction), saying
// so; without this the first to start would reserve what the others need.
void ShareGpus(worker::WorkerOptions& w, int workers) {
  const int count = GpusNeeded(w.towers);
  if (count == 0 || w.gpu_memory_fraction > 0.0 || w.allow_growth) return;
  const double share = SharedGpuFraction(workers, count, VisibleGpuIds());
  if (share <= 0.0) return;
  w.gpu_memory_fraction = share;
  TOWERPS_LOG(kInfo) << workers << " workers share this machine's GPUs: each takes "
                     << "--gpu-memory-fraction " << share
                     << " (give --gpu-memory-fraction or --allow-growth to choose)";
}

}  // namespace

LocalLauncher::LocalLauncher(LaunchOptions options)
    : options_(std::move(options)),
      run_dir_(options_.run_dir.empty() ? DefaultRunDir() : options_.run_dir) {
  options_.all_local = true;
  // Every server shares this machine: auto splits half its cores between them.
  auto_server_threads_ = options_.server_threads == "auto";
  if (auto_server_threads_) {
    options_.server_threads = std::to_string(ps::AutoServerThreads(options_.job.ServerProcesses()));
  }
}

// The processes of a job on this machine, as the launcher starts them: the group, its
// supervisor, processes.txt, and the secret every process gets.
struct LocalLauncher::Job {
  Job(const LaunchOptions& o, const std::string& run_dir)
      : group(run_dir),
        supervisor(&group, o.grace, o.interrupt),
        table((fs::path(run_dir) / "processes.txt").string()) {}
  ProcessGroup group;
  JobSupervisor supervisor;
  std::ofstream table;
  std::vector<std::string> secret_env;  // TOWERPS_SECRET_FILE=..., or none with --insecure
};

Status LocalLauncher::Check() {
  TOWERPS_RETURN_IF_ERROR(ValidateLaunchOptions(options_));
  TOWERPS_RETURN_IF_ERROR(CheckRunDir(run_dir_));
  return CheckLocalJob(options_);
}

Status LocalLauncher::Run() {
  TOWERPS_RETURN_IF_ERROR(Check());
  ShareGpus(options_.worker, options_.job.workers);
  if (options_.bind_cores) BindCores();
  TOWERPS_RETURN_IF_ERROR(CreateRunDir(run_dir_));
  TOWERPS_RETURN_IF_ERROR(WriteJobRecord(options_, run_dir_));
  TOWERPS_ASSIGN_OR_RETURN(const std::string secret, PrepareJobSecret(options_, run_dir_));
  Job job(options_, run_dir_);
  // Every process proves it belongs to the job with this file (docs/SECURITY.md).
  if (!secret.empty()) job.secret_env.push_back("TOWERPS_SECRET_FILE=" + secret);
  if (options_.job_progress_bar) {
    job.group.EnableProgress("worker:0", ExamplesPerChiefStep(options_.job));
  }
  TOWERPS_ASSIGN_OR_RETURN(const std::vector<std::string> ready_files, StartServers(job));
  TOWERPS_ASSIGN_OR_RETURN(const std::vector<std::string> endpoints,
                           AwaitServers(job, ready_files));
  const size_t first_worker = job.group.size();
  int dist_port = options_.base_port + options_.job.ServerProcesses();
  if (options_.base_port == 0 && !options_.worker_cmd.empty()) {
    TOWERPS_ASSIGN_OR_RETURN(const std::vector<int> free, PickFreePorts(1));
    dist_port = free[0];
  }
  options_.worker.dist_endpoint = DistEndpoint(options_, "127.0.0.1", dist_port);
  TOWERPS_RETURN_IF_ERROR(StartWorkers(job, endpoints));
  job.supervisor.SetRestartPolicy(MakeRestartPolicy(options_, run_dir_, /*workers_local=*/true));
  TOWERPS_RETURN_IF_ERROR(job.supervisor.RunToCompletion(first_worker));
  std::map<std::string, int> restarts;
  for (const auto& [i, n] : job.supervisor.restarts()) restarts[job.group.tag(i)] = n;
  return RecordRestartsInSummary(options_, restarts);
}

// --bind-cores: the slices of this machine's cores, said; a server's auto threads fit its slice.
void LocalLauncher::BindCores() {
  const int workers = options_.job.workers, servers = options_.job.ServerProcesses();
  binding_ = CoreBinding::For(UsablePhysicalCores(), workers);
  if (!binding_.Bound()) {
    TOWERPS_LOG(kWarning) << "--bind-cores: this process's CPUs cannot be read "
                             "(sched_getaffinity); the job runs unbound";
    return;
  }
  TOWERPS_LOG(kInfo) << "--bind-cores: " << binding_.Describe(workers, servers)
                     << (binding_.Shared(workers) ? " (more workers than cores: they share)" : "");
  const int cpus = binding_.CpusPerWorker();
  if (options_.worker.intra_op_threads > cpus) {
    TOWERPS_LOG(kWarning) << "--intra-op-threads " << options_.worker.intra_op_threads
                          << " is more than the " << cpus
                          << " CPU(s) a worker is bound to: its threads take turns";
  }
  // Checked by Check() before this, or made from auto by the constructor.
  const Result<int> parsed = ps::ParseServerThreads(options_.server_threads, "--server-threads");
  const int threads = parsed.ok() ? *parsed : 1;
  if (auto_server_threads_ && threads > cpus) {
    options_.server_threads = std::to_string(cpus);  // auto: the server's slice, not the machine
  } else if (threads > cpus) {
    TOWERPS_LOG(kWarning) << "--server-threads " << threads << " is more than the " << cpus
                          << " CPU(s) a server is bound to: its threads take turns";
  }
}

// Servers first; each reports its endpoint through a ready file. Replicas must know each other's
// endpoints from the start: their ports are chosen here. Returns the ready files, by rank.
Result<std::vector<std::string>> LocalLauncher::StartServers(Job& job) {
  const LaunchOptions& o = options_;
  const int servers = o.job.ServerProcesses();
  std::vector<int> ports(static_cast<size_t>(servers), 0);
  if (o.job.ps_replicas > 1) {
    if (o.base_port > 0) {
      for (int r = 0; r < servers; ++r) ports[r] = o.base_port + r;
    } else {
      TOWERPS_ASSIGN_OR_RETURN(ports, PickFreePorts(servers));
    }
    const bool any = o.bind == "0.0.0.0" || o.bind == "*";
    for (int p : ports) peers_.push_back(TcpEndpoint(any ? "127.0.0.1" : o.bind, p));
  }
  std::vector<std::string> ready_files;
  std::error_code ec;
  for (int r = 0; r < servers; ++r) {
    const std::string ready =
        (fs::path(run_dir_) / ("ps-" + std::to_string(r) + ".endpoint")).string();
    fs::remove(ready, ec);
    std::vector<std::string> argv =
        ServerArgv(o, r, o.base_port ? o.base_port + r : ports[r], peers_);
    argv.insert(argv.end(), {"--ready-file", ready});
    TOWERPS_ASSIGN_OR_RETURN(size_t i, job.group.Start({.tag = "ps:" + std::to_string(r),
                                                        .argv = argv,
                                                        .extra_env = job.secret_env,
                                                        .cpus = binding_.Server(r)}));
    job.table << "ps " << r << " pid " << job.group.pid(i) << " log " << job.group.LogPath(i)
              << "\n";
    ready_files.push_back(ready);
  }
  job.table.flush();
  return ready_files;
}

// Waits for every server's endpoint; a restarted server must come back where the workers look
// for it, so each server's command line is fixed to its port.
Result<std::vector<std::string>> LocalLauncher::AwaitServers(
    Job& job, const std::vector<std::string>& ready_files) {
  std::vector<std::string> endpoints;
  const Deadline startup = Deadline::After(options_.startup_timeout);
  for (int r = 0; r < static_cast<int>(ready_files.size()); ++r) {
    while (!fs::exists(ready_files[r])) {
      if (job.supervisor.interrupted()) return job.supervisor.Cancel();
      TOWERPS_RETURN_IF_ERROR(job.supervisor.CheckNoneExited("while starting"));
      if (startup.expired()) return job.supervisor.Fail(r, "did not start listening in time");
      job.group.Pump(Deadline::After(std::chrono::milliseconds(20)));
    }
    std::string endpoint;
    std::ifstream(ready_files[r]) >> endpoint;
    TOWERPS_ASSIGN_OR_RETURN(const int64_t port,
                             ParseIntInRange(endpoint.substr(endpoint.rfind(':') + 1),
                                             "server endpoint port", 1, 65535));
    std::vector<std::string> again = ServerArgv(options_, r, static_cast<int>(port), peers_);
    again.insert(again.end(), {"--ready-file", ready_files[r]});
    job.group.SetArgv(static_cast<size_t>(r), std::move(again));
    // A server bound to every interface is reached over loopback here.
    const std::string any = "tcp://0.0.0.0:";
    if (endpoint.rfind(any, 0) == 0) endpoint = "tcp://127.0.0.1:" + endpoint.substr(any.size());
    endpoints.push_back(endpoint);
  }
  return endpoints;
}

Status LocalLauncher::StartWorkers(Job& job, const std::vector<std::string>& endpoints) {
  const LaunchOptions& o = options_;
  for (int w = 0; w < o.job.workers; ++w) {
    std::vector<std::string> env = job.secret_env;
    if (const std::string gpu = GpusForRank(w, GpusNeeded(o.worker.towers)); !gpu.empty())
      env.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
    TOWERPS_ASSIGN_OR_RETURN(size_t i, job.group.Start({.tag = "worker:" + std::to_string(w),
                                                        .argv = WorkerArgv(o, w, endpoints),
                                                        .extra_env = env,
                                                        .cpus = binding_.Worker(w)}));
    job.table << "worker " << w << " pid " << job.group.pid(i) << " log " << job.group.LogPath(i)
              << "\n";
  }
  job.table.flush();
  return Status::Ok();
}

LauncherBackend LocalBackend() {
  return {.name = "local",
          .applies = [](const LaunchFlags&, const Environment&) { return true; },
          .make = [](const LaunchFlags&, const Environment&,
                     LaunchOptions options) -> Result<std::unique_ptr<Launcher>> {
            options.all_local = true;
            options.job_progress_bar = isatty(STDOUT_FILENO) != 0;
            return std::unique_ptr<Launcher>(std::make_unique<LocalLauncher>(std::move(options)));
          }};
}

}  // namespace towerps::launch
