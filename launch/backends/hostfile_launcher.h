// HostfileLauncher: runs one job across the hosts of a hostfile (hostfile.h), or of -H's list,
// starting every process with ssh: `towerps-launch --hostfile hosts.txt --ssh-opts "-i key" ...`
// or `towerps-launch -H node1:4,node2:4 ...`.
//
// - Each process runs on its host under the stdin watchdog (stdin_watchdog.h), from the same
//   absolute paths as here (a shared file system or the same install on every host), and in
//   this directory when the host has it. Its output comes back through ssh with a "[ps:0]" or
//   "[worker:3]" prefix and is kept in the run directory, with processes.txt (tag, host, pid of
//   the ssh client, log).
// - Server r listens on bind:base_port + r on its host; workers reach it as tcp://host:port, so
//   host names in the hostfile must resolve on every host. Workers get GPUs by local rank.
// - Remote processes start from the host's login environment; --export NAME forwards a
//   variable from here (OPENBLAS_CORETYPE, for example, changes which kernels OpenBLAS runs).
// - ssh runs with BatchMode (no password prompts), a connection timeout and keep-alives, after
//   the user's --ssh-opts (whose -o settings win). An unreachable host fails the job with ssh's
//   message, naming the process and host.
// - Stopping a process closes its ssh session's stdin; the watchdog on its host then sends it
//   SIGTERM and, after the grace period, SIGKILL. If this launcher dies, the sessions close and
//   the same happens, so no process outlives the job on any host.
// - Failures, interrupts and the end of the job: JobSupervisor (job_supervisor.h).
//
// Contract: Run() once, from one thread. Nothing is left running locally when it returns; remote
// processes are stopped by their watchdogs within the grace period.
#ifndef TOWERPS_LAUNCH_BACKENDS_HOSTFILE_LAUNCHER_H_
#define TOWERPS_LAUNCH_BACKENDS_HOSTFILE_LAUNCHER_H_

#include <string>
#include <vector>

#include "launch/backends/launcher.h"
#include "launch/hostfile.h"
#include "launch/launch_options.h"
#include "launch/role.h"
#include "launch/ssh_options.h"
#include "towerps/result.h"

namespace towerps::launch {

class HostfileLauncher final : public Launcher {
 public:
  HostfileLauncher(LaunchOptions options, SshOptions ssh);
  // Every check Run() makes before it starts anything: the options, the ssh client, the hosts
  // and the placement on them. kInvalidArgument (kNotFound for a missing file) naming the flag.
  Status Check() override;
  Status Run() override;
  const std::string& run_dir() const { return run_dir_; }

 private:
  Result<std::vector<HostPlacement>> Plan() const;
  Result<std::string> SecretLine() const;
  std::vector<std::string> ReplicaPeers(const std::vector<HostPlacement>& plan) const;

  LaunchOptions options_;
  SshOptions ssh_;
  std::string run_dir_;
};

// `word` quoted for a POSIX shell (unchanged when it holds only safe characters).
std::string ShellQuote(const std::string& word);
// The ssh client's argv that runs `remote_argv` on `host` under the stdin watchdog.
std::vector<std::string> SshArgv(const SshOptions& ssh, const std::string& host,
                                 const std::vector<std::string>& remote_argv);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_BACKENDS_HOSTFILE_LAUNCHER_H_
