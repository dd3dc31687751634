#include "launch/local_launcher.h"
#include "common/sibling_executable.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launch/gpus.h"
#include "launch/process_group.h"
#include "worker/straggler.h"

namespace towerps::launch {
namespace {

namespace fs = std::filesystem;

std::string DefaultRunDir() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[64];
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
  return "runs/" + std::string(stamp) + "-" + std::to_string(getpid());
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += "    " + l + "\n";
  return out;
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
                                " servers below 65536");
  }
  if (o.base_port > 0 && o.base_port < 1024 && geteuid() != 0) {
    return InvalidArgumentError("--base-port=" + std::to_string(o.base_port) +
                                " needs root; use a port of 1024 or more, or 0 for free ports");
  }
  if (o.server_threads < 1) return InvalidArgumentError("--server-threads must be at least 1");
  struct Binary {
    const char* flag;
    const std::string& path;
    const char* fallback;
  };
  for (const Binary& b : {Binary{"--server-bin", o.server_binary, "towerps-server"},
                          Binary{"--worker-bin", o.worker_binary, "towerps-worker"}}) {
    const std::string p = b.path.empty() ? SiblingExecutable(b.fallback) : b.path;
    const std::string flag = b.flag;
    if (access(p.c_str(), X_OK) != 0) {
      return NotFoundError(flag + " " + p + " is not an executable; build it or pass " + flag);
    }
  }
  return Status::Ok();
}

LocalLauncher::LocalLauncher(LaunchOptions options)
    : options_(std::move(options)),
      run_dir_(options_.run_dir.empty() ? DefaultRunDir() : options_.run_dir) {}

Status LocalLauncher::Run() {
  TOWERPS_RETURN_IF_ERROR(ValidateLaunchOptions(options_));
  const LaunchOptions& o = options_;
  std::error_code ec;
  fs::create_directories(run_dir_, ec);
  if (ec) return IoError("--run-dir " + run_dir_ + ": cannot create: " + ec.message());
  std::printf("[launch] run directory: %s\n", fs::absolute(run_dir_).c_str());
  std::fflush(stdout);

  ProcessGroup group(run_dir_);
  std::ofstream table((fs::path(run_dir_) / "processes.txt").string());
  const std::string server_bin =
      o.server_binary.empty() ? SiblingExecutable("towerps-server") : o.server_binary;
  const std::string worker_bin =
      o.worker_binary.empty() ? SiblingExecutable("towerps-worker") : o.worker_binary;
  const std::vector<std::string> job_args = o.job.ToArgs();

  // Servers first; each reports its endpoint through a ready file.
  std::vector<std::string> ready_files;
  for (int r = 0; r < o.job.servers; ++r) {
    const std::string ready =
        (fs::path(run_dir_) / ("ps-" + std::to_string(r) + ".endpoint")).string();
    fs::remove(ready, ec);
    std::vector<std::string> argv = {server_bin,
                                     "--rank",
                                     std::to_string(r),
                                     "--bind",
                                     o.bind,
                                     "--port",
                                     std::to_string(o.base_port ? o.base_port + r : 0),
                                     "--threads",
                                     std::to_string(o.server_threads),
                                     "--ready-file",
                                     ready};
    if (!o.checkpoint_dir.empty()) {
      for (const std::string& a :
           {std::string("--checkpoint-dir"), o.checkpoint_dir, std::string("--checkpoint-every"),
            std::to_string(o.checkpoint_every)}) {
        argv.push_back(a);
      }
    }
    if (o.worker.log_device_placement) argv.push_back("--log-device-placement");
    argv.insert(argv.end(), job_args.begin(), job_args.end());
    TOWERPS_ASSIGN_OR_RETURN(size_t i, group.Start("ps:" + std::to_string(r), argv));
    table << "ps " << r << " pid " << group.pid(i) << " log " << group.LogPath(i) << "\n";
    ready_files.push_back(ready);
  }
  table.flush();

  auto failure = [&](size_t i, const std::string& what) {
    std::fprintf(stderr, "[launch] %s %s; last lines of %s:\n%s", group.tag(i).c_str(),
                 what.c_str(), group.LogPath(i).c_str(), Join(group.Tail(i)).c_str());
    std::fprintf(stderr, "[launch] stopping the job\n");
    group.TerminateAll(o.grace);
    return InternalError(group.tag(i) + " " + what + " (log: " + group.LogPath(i) + ")");
  };
  auto interrupted = [&]() { return o.interrupt && o.interrupt->load() != 0; };
  auto cancel = [&]() {
    std::fprintf(stderr, "[launch] signal %d received; stopping the job\n", o.interrupt->load());
    group.TerminateAll(o.grace);
    return CancelledError("interrupted by signal " + std::to_string(o.interrupt->load()));
  };

  std::vector<std::string> endpoints;
  const Deadline startup = Deadline::After(o.startup_timeout);
  for (int r = 0; r < o.job.servers; ++r) {
    while (!fs::exists(ready_files[r])) {
      if (interrupted()) return cancel();
      for (size_t i = 0; i < group.size(); ++i) {
        if (auto code = group.ExitCode(i)) {
          return failure(i, "exited with code " + std::to_string(*code) + " while starting");
        }
      }
      if (startup.expired()) return failure(r, "did not start listening in time");
      group.Pump(Deadline::After(std::chrono::milliseconds(20)));
    }
    std::string endpoint;
    std::ifstream(ready_files[r]) >> endpoint;
    // A server bound to every interface is reached over loopback here.
    const std::string any = "tcp://0.0.0.0:";
    if (endpoint.rfind(any, 0) == 0) endpoint = "tcp://127.0.0.1:" + endpoint.substr(any.size());
    endpoints.push_back(endpoint);
  }
  std::string endpoint_list;
  for (const std::string& e : endpoints) endpoint_list += (endpoint_list.empty() ? "" : ",") + e;

  const size_t first_worker = group.size();
  const std::vector<std::string> worker_args = o.worker.ToArgs();
  for (int w = 0; w < o.job.workers; ++w) {
    std::vector<std::string> argv = {worker_bin, "--rank", std::to_string(w), "--ps-endpoints",
                                     endpoint_list};
    argv.insert(argv.end(), job_args.begin(), job_args.end());
    argv.insert(argv.end(), worker_args.begin(), worker_args.end());
    std::vector<std::string> env;
    if (const std::string gpu = GpuForRank(w); !gpu.empty())
      env.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
    TOWERPS_ASSIGN_OR_RETURN(size_t i, group.Start("worker:" + std::to_string(w), argv, env));
    table << "worker " << w << " pid " << group.pid(i) << " log " << group.LogPath(i) << "\n";
  }
  table.flush();

  // Watch until every worker has finished.
  for (;;) {
    if (interrupted()) return cancel();
    bool workers_done = true;
    for (size_t i = 0; i < group.size(); ++i) {
      std::optional<int> code = group.ExitCode(i);
      if (code && *code != 0) return failure(i, "exited with code " + std::to_string(*code));
      if (code && i < first_worker) return failure(i, "exited before the workers finished");
      if (i >= first_worker && !code) workers_done = false;
    }
    if (workers_done) break;
    group.Pump(Deadline::After(std::chrono::milliseconds(100)));
  }

  // Workers succeeded: stop the servers (they checkpoint on SIGTERM) and check they exit cleanly.
  for (size_t i = 0; i < first_worker; ++i) group.Signal(i, SIGTERM);
  const Deadline stop = Deadline::After(o.grace);
  while (!group.AllExited() && !stop.expired())
    group.Pump(Deadline::After(std::chrono::milliseconds(50)));
  for (size_t i = 0; i < first_worker; ++i) {
    std::optional<int> code = group.ExitCode(i);
    if (!code) return failure(i, "did not stop within the grace period");
    if (*code != 0) return failure(i, "exited with code " + std::to_string(*code) + " at shutdown");
  }
  std::printf("[launch] job finished: %d workers and %d servers exited cleanly\n", o.job.workers,
              o.job.servers);
  return Status::Ok();
}

}  // namespace towerps::launch
