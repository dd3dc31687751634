// The remote end of an ssh-launched process: `towerps-launch --stdin-watchdog [opts] -- CMD...`.
//
// ssh gives a remote command no signal when the connection goes away: the launcher dying, ssh
// being killed or the network failing only close the session's stdin. The watchdog runs CMD as
// a child in its own process group and watches its own stdin; at EOF (or SIGTERM, SIGINT,
// SIGHUP) it sends SIGTERM to the child's group, waits `grace`, then SIGKILLs it. So a job
// stops on every host when its launcher stops, and no orphans remain. The launcher stops a
// remote process gracefully by closing that ssh session's stdin.
//
// With secret_from_stdin, the launcher's first line on stdin is the job's secret, which thus
// crosses to the remote host inside the ssh session, never on a command line.
//
// Contract: RunStdinWatchdog() returns the child's exit code (128 + signal when it was killed),
// or 127 when it cannot be started. It never returns while the child's process group may still
// run. One call per process; `interrupt` is written by the entry point's signal handler.
#ifndef TOWERPS_LAUNCH_STDIN_WATCHDOG_H_
#define TOWERPS_LAUNCH_STDIN_WATCHDOG_H_

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace towerps::launch {

struct WatchdogOptions {
  std::vector<std::string> argv;  // argv[0] is an absolute path on this host
  std::chrono::milliseconds grace{10000};
  std::string chdir;  // run the child here when the directory exists (shared file systems)
  int gpu_rank = -1;  // >= 0: CUDA_VISIBLE_DEVICES from this local rank on this host
  int gpu_count = 1;  // GPUs for that rank (launch/gpus.h)
  std::vector<std::string> env;  // "NAME=value" added to the child's environment
  // The first line of stdin is the job's secret (JobSecret::ToText): it is saved to a private
  // file (mode 0600, in a fresh 0700 directory under $TMPDIR or /tmp) named to the child by
  // TOWERPS_SECRET_FILE, and removed when the child has exited.
  bool secret_from_stdin = false;
  const std::atomic<int>* interrupt = nullptr;  // borrowed; non-zero: a signal was received
};

int RunStdinWatchdog(const WatchdogOptions& options);

// `towerps-launch --stdin-watchdog [options] -- COMMAND...`: its command line into
// WatchdogOptions, then RunStdinWatchdog; the exit code (2 for a bad command line). The caller
// has installed the signal handlers that set `interrupt`.
int WatchdogMain(int argc, char** argv, const std::atomic<int>* interrupt);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_STDIN_WATCHDOG_H_
