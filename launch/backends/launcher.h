// Launcher: one way of starting a job's processes, chosen by towerps-launch's main() from the
// command line and the environment. The backends:
//   - rank (launch/backends/rank_launcher.h): one towerps-launch per process, started by an engine
//   the
//     user runs (mpirun, srun, a cluster spec, TF_CONFIG, TOWERPS_CONFIG), each becoming its
//     role;
//   - hostfile (launch/backends/hostfile_launcher.h): every process, on a hostfile's hosts over
//   ssh;
//   - local (launch/backends/local_launcher.h): every process, on this machine.
// Each is a LauncherBackend: whether a command line is its, and how its launcher is made.
// LauncherBackends() lists them in the order they are asked (launch/backends/launcher.cc): a new
// backend, a Kubernetes- or Ray-style one, is one new file and its line there.
//
// Contract: Check() before Run(), each once, from one thread.
#ifndef TOWERPS_LAUNCH_BACKENDS_LAUNCHER_H_
#define TOWERPS_LAUNCH_BACKENDS_LAUNCHER_H_

#include <memory>
#include <vector>

#include "launch/launch_options.h"
#include "launch/role.h"
#include "towerps/result.h"

namespace towerps::launch {

class LaunchFlags;  // launch/launch_flags.h

class Launcher {
 public:
  virtual ~Launcher() = default;
  // Every check before anything starts (the options; what this machine has: data, devices,
  // ports); kInvalidArgument naming the flag.
  virtual Status Check() = 0;
  // Runs the job to its end: OK only when every process exited 0, and nothing is left running.
  // A launcher that does not supervise becomes this process's role instead (exec), and returns
  // only when that failed.
  virtual Status Run() = 0;
  // Whether Run() watches child processes from here (the entry point then catches interrupts
  // for it); false for one that execs.
  virtual bool supervises() const { return true; }
};

struct LauncherBackend {
  const char* name = "";
  // Whether the command line and the environment ask for this backend.
  bool (*applies)(const LaunchFlags& flags, const Environment& env) = nullptr;
  // Its launcher for `options`; kInvalidArgument for a value it cannot take.
  Result<std::unique_ptr<Launcher>> (*make)(const LaunchFlags& flags, const Environment& env,
                                            LaunchOptions options) = nullptr;
};

// Every backend, in the order they are asked; the first that applies runs the job (local, the
// last, takes any command line).
std::vector<LauncherBackend> LauncherBackends();

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_BACKENDS_LAUNCHER_H_
