#include "launch/rank_exec.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/deadline.h"
#include "common/job_secret.h"
#include "common/transport.h"
#include "launch/command_lines.h"
#include "launch/gpus.h"

namespace towerps::launch {
namespace {

namespace fs = std::filesystem;

std::string EndpointFile(const std::string& run_dir, int rank) {
  return (fs::path(run_dir) / ("ps-" + std::to_string(rank) + ".endpoint")).string();
}

// Becomes argv[0] with `argv`; returns only if the exec failed.
Status Exec(std::vector<std::string> argv) {
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::fflush(stdout);
  execv(cargv[0], cargv.data());
  return InternalError("cannot exec " + argv[0] + ": " + std::strerror(errno));
}

// The first line of `path`, once some process has published it there (written to a temporary
// file, then renamed).
Result<std::string> AwaitPublished(const std::string& path, const std::string& who,
                                   const Deadline& deadline) {
  while (!fs::exists(path)) {
    if (deadline.expired()) {
      return TimeoutError(who + " did not publish " + path +
                          " in time; is --run-dir shared by all nodes?");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string line;
  std::ifstream(path) >> line;
  return line;
}

Status Publish(const std::string& path, const std::string& line) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  std::ofstream(path + ".tmp") << line << "\n";
  fs::rename(path + ".tmp", path, ec);
  if (ec) return IoError("cannot publish " + path + ": " + ec.message());
  return Status::Ok();
}

std::string HostName() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return host;
}

Status NeedRunDir(const LaunchOptions& o) {
  if (!o.run_dir.empty()) return Status::Ok();
  return InvalidArgumentError(
      "the servers' hosts are unknown here (MPI across nodes): pass --run-dir on a shared file "
      "system for the rendezvous");
}

Result<std::vector<std::string>> AwaitEndpoints(const RoleAssignment& role,
                                                const LaunchOptions& o) {
  TOWERPS_RETURN_IF_ERROR(NeedRunDir(o));
  std::vector<std::string> endpoints;
  const Deadline deadline = Deadline::After(o.startup_timeout);
  for (int r = 0; r < role.servers; ++r) {
    TOWERPS_ASSIGN_OR_RETURN(
        std::string e,
        AwaitPublished(EndpointFile(o.run_dir, r), "server " + std::to_string(r), deadline));
    endpoints.push_back(std::move(e));
  }
  return endpoints;
}

// Where worker 0 keeps the workers' collectives' rendezvous when hosts are unknown (MPI across
// nodes): worker 0 publishes its host and base_port + servers in --run-dir, the others read it.
Result<std::string> DistEndpointByRunDir(const RoleAssignment& role, const LaunchOptions& o) {
  TOWERPS_RETURN_IF_ERROR(NeedRunDir(o));
  const std::string path = (fs::path(o.run_dir) / "dist.endpoint").string();
  if (role.rank == 0) {
    const std::string endpoint = TcpEndpoint(HostName(), o.base_port + role.servers);
    TOWERPS_RETURN_IF_ERROR(Publish(path, endpoint));
    return endpoint;
  }
  return AwaitPublished(path, "worker 0", Deadline::After(o.startup_timeout));
}

}  // namespace

Status ExecRole(const RoleAssignment& role, const LaunchOptions& o) {
  std::vector<std::string> argv;
  if (role.role == RoleAssignment::Role::kServer) {
    argv = ServerArgv(o, role.rank, role.port);
    if (role.ps_endpoints.empty()) {  // publish for the rendezvous
      TOWERPS_RETURN_IF_ERROR(
          Publish(EndpointFile(o.run_dir, role.rank), TcpEndpoint(HostName(), role.port)));
    }
  } else {
    std::vector<std::string> endpoints = role.ps_endpoints;
    if (endpoints.empty()) {
      TOWERPS_ASSIGN_OR_RETURN(endpoints, AwaitEndpoints(role, o));
    }
    LaunchOptions with_shutdown = o;
    with_shutdown.worker.shutdown_servers = true;  // no launcher stays behind to stop the servers
    with_shutdown.worker.progress_bar = false;     // mpirun gives the ranks one shared terminal
    if (!o.worker_cmd.empty() && o.worker.dist_endpoint.empty()) {
      std::string dist = role.dist_endpoint;
      if (dist.empty()) {
        TOWERPS_ASSIGN_OR_RETURN(dist, DistEndpointByRunDir(role, o));
      }
      with_shutdown.worker.dist_endpoint = dist;
    }
    argv = WorkerArgv(with_shutdown, role.rank, endpoints);
    if (const std::string gpu = GpusForRank(role.local_rank, GpusNeeded(o.worker.towers));
        !gpu.empty()) {
      setenv("CUDA_VISIBLE_DEVICES", gpu.c_str(), 1);
    }
  }
  // The secret's path, never the secret, and not on the command line (docs/SECURITY.md).
  if (!o.insecure) setenv("TOWERPS_SECRET_FILE", o.secret_file.c_str(), 1);
  return Exec(std::move(argv));
}

Status ExecEvalOnly(const LaunchOptions& o) {
  if (o.checkpoint_dir.empty()) {
    return InvalidArgumentError("--eval-only needs --checkpoint-dir, the directory a job wrote");
  }
  if (!o.worker_cmd.empty()) {
    return InvalidArgumentError(
        "--eval-only evaluates a native model on its checkpoint; a --worker-cmd script's model is "
        "its own: run the script again with the same --checkpoint-dir (it resumes where the job "
        "ended: optimizer.start_step) and --export-npz, which its finish() writes");
  }
  if (o.bind_cores) {
    return InvalidArgumentError(
        "--bind-cores binds a job's servers and workers; --eval-only runs one worker in this "
        "process's place, on the CPUs this process has: drop --bind-cores (taskset chooses them)");
  }
  std::vector<std::string> argv = {WorkerBinary(o), "--eval-only", "--checkpoint-dir",
                                   o.checkpoint_dir};
  const std::vector<std::string> job = WorkerJobArgs(o);
  argv.insert(argv.end(), job.begin(), job.end());
  return Exec(std::move(argv));
}

Status ResolveSharedSecret(const Environment& env, LaunchOptions* options) {
  if (options->insecure) return Status::Ok();
  if (options->secret_file.empty() && env.count("TOWERPS_SECRET_FILE")) {
    options->secret_file = env.at("TOWERPS_SECRET_FILE");
  }
  if (options->secret_file.empty()) {
    return InvalidArgumentError(
        "every process of a --mpi, --slurm or --cluster job needs the same job secret: create "
        "one with `towerps-launch --new-secret FILE` on a file system all nodes share, then "
        "pass --secret-file FILE (or export TOWERPS_SECRET_FILE=FILE); or pass --insecure");
  }
  return JobSecret::Load(options->secret_file).status().WithContext("--secret-file");
}

}  // namespace towerps::launch
