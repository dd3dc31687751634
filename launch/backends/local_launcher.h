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
// Contract: a Launcher (launch/backends/launcher.h), the backend that takes any command line; Run()
// once, from one thread. Nothing is left running when it returns.
#ifndef TOWERPS_LAUNCH_BACKENDS_LOCAL_LAUNCHER_H_
#define TOWERPS_LAUNCH_BACKENDS_LOCAL_LAUNCHER_H_

#include <string>
#include <vector>

#include "launch/backends/launcher.h"
#include "launch/core_binding.h"
#include "launch/launch_options.h"
#include "towerps/result.h"

namespace towerps::launch {

class LocalLauncher final : public Launcher {
 public:
  explicit LocalLauncher(LaunchOptions options);
  // Every check Run() makes before it starts anything (the options; the data, devices and ports
  // of this machine); kInvalidArgument naming the flag.
  Status Check() override;
  // Runs the job to the end. OK only when every process exited 0.
  Status Run() override;
  const std::string& run_dir() const { return run_dir_; }

 private:
  struct Job;
  Result<std::vector<std::string>> StartServers(Job& job);
  Result<std::vector<std::string>> AwaitServers(Job& job,
                                                const std::vector<std::string>& ready_files);
  Status StartWorkers(Job& job, const std::vector<std::string>& endpoints);
  void BindCores();

  LaunchOptions options_;
  std::string run_dir_;
  std::vector<std::string> peers_;    // --ps-replicas 2: every server's endpoint, by rank
  bool auto_server_threads_ = false;  // --server-threads auto (made a number from the machine)
  CoreBinding binding_;               // --bind-cores; unbound without it
};

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_BACKENDS_LOCAL_LAUNCHER_H_
