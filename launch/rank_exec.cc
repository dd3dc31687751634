#include "launch/rank_exec.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/deadline.h"
#include "common/job_secret.h"
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

Result<std::vector<std::string>> AwaitEndpoints(const RoleAssignment& role,
                                                const LaunchOptions& o) {
  if (o.run_dir.empty()) {
    return InvalidArgumentError(
        "the servers' hosts are unknown here (MPI across nodes): pass "
        "--run-dir on a shared file system for the rendezvous");
  }
  std::vector<std::string> endpoints;
  const Deadline deadline = Deadline::After(o.startup_timeout);
  for (int r = 0; r < role.servers; ++r) {
    const std::string path = EndpointFile(o.run_dir, r);
    while (!fs::exists(path)) {
      if (deadline.expired()) {
        return TimeoutError("server " + std::to_string(r) + " did not publish " + path +
                            " in time; is --run-dir shared by all nodes?");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string e;
    std::ifstream(path) >> e;
    endpoints.push_back(e);
  }
  return endpoints;
}

}  // namespace

Status ExecRole(const RoleAssignment& role, const LaunchOptions& o) {
  std::vector<std::string> argv;
  if (role.role == RoleAssignment::Role::kServer) {
    argv = ServerArgv(o, role.rank, role.port);
    if (role.ps_endpoints.empty()) {  // publish for the rendezvous
      char host[256] = {0};
      gethostname(host, sizeof(host) - 1);
      std::error_code ec;
      fs::create_directories(o.run_dir, ec);
      const std::string path = EndpointFile(o.run_dir, role.rank);
      std::ofstream(path + ".tmp") << "tcp://" << host << ":" << role.port << "\n";
      fs::rename(path + ".tmp", path, ec);
      if (ec) return IoError("cannot publish " + path + ": " + ec.message());
    }
  } else {
    std::vector<std::string> endpoints = role.ps_endpoints;
    if (endpoints.empty()) {
      TOWERPS_ASSIGN_OR_RETURN(endpoints, AwaitEndpoints(role, o));
    }
    LaunchOptions with_shutdown = o;
    with_shutdown.worker.shutdown_servers = true;  // no launcher stays behind to stop the servers
    with_shutdown.worker.progress_bar = false;     // mpirun gives the ranks one shared terminal
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
