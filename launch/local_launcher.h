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
// - Failures, interrupts and the end of the job are handled by JobSupervisor
//   (job_supervisor.h): a failing process stops the job, and the job succeeds only when every
//   worker and then every server exits 0.
//
// Contract: Run() once, from one thread. Nothing is left running when it returns.
#ifndef TOWERPS_LAUNCH_LOCAL_LAUNCHER_H_
#define TOWERPS_LAUNCH_LOCAL_LAUNCHER_H_

#include <string>

#include "launch/launch_options.h"
#include "towerps/status.h"

namespace towerps::launch {

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

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_LOCAL_LAUNCHER_H_
