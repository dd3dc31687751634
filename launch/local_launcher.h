// LocalLauncher: runs one job on this machine: M towerps-server processes, then N towerps-worker
// processes, and watches them until the job ends.
//
// - Every process gets the same job configuration (JobConfig::ToArgs), so servers never see a
//   mismatch from a launcher-started job.
// - Output lines are prefixed with the process's tag ("[worker:1]") unless they already carry
//   it, printed to stdout, and kept per process in the run directory (<tag>.log), next to
//   processes.txt (role, rank, pid, log).
// - Servers pick free ports unless base_port is set; workers learn the endpoints from the
//   servers' ready files. Workers get GPUs round-robin through CUDA_VISIBLE_DEVICES.
// - If any process fails, the others are stopped (SIGTERM, then SIGKILL after `grace`), the
//   failing process's last lines are shown, and Run() returns an error naming it.
// - When every worker has exited 0, the servers are asked to stop (SIGTERM: they write their
//   final checkpoint) and Run() returns OK only if they exit 0 as well.
// - *interrupt (set by the entry point's signal handler) stops the job the same way.
//
// Contract: Run() once, from one thread. Nothing is left running when it returns.
#ifndef TOWERPS_LAUNCH_LOCAL_LAUNCHER_H_
#define TOWERPS_LAUNCH_LOCAL_LAUNCHER_H_

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "common/result.h"
#include "ps/job_config.h"
#include "worker/worker_options.h"

namespace towerps::launch {

struct LaunchOptions {
  ps::JobConfig job;
  worker::WorkerOptions worker;
  std::string run_dir;             // empty: runs/<date>-<time>-<pid>
  std::string bind = "127.0.0.1";  // servers listen here
  int base_port = 0;               // 0: free ports; else server r listens on base_port + r
  int server_threads = 1;
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  std::string server_binary;  // empty: towerps-server next to this executable
  std::string worker_binary;  // empty: towerps-worker next to this executable
  std::chrono::milliseconds grace{10000};
  std::chrono::milliseconds startup_timeout{60000};
  const std::atomic<int>* interrupt = nullptr;  // borrowed; non-zero: the signal received
};

class LocalLauncher {
 public:
  explicit LocalLauncher(LaunchOptions options);
  // Runs the job to the end. OK only when every process exited 0.
  Status Run();
  const std::string& run_dir() const { return run_dir_; }

 private:
  LaunchOptions options_;
  std::string run_dir_;
};

// Checks the launcher's own options (ports, binaries, counts) before anything starts.
Status ValidateLaunchOptions(const LaunchOptions& options);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_LOCAL_LAUNCHER_H_
