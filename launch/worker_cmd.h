// --worker-cmd: workers that are the user's own program (a PyTorch script using the `towerps`
// Python package, python/towerps/torch.py) instead of a towerps-worker binary.
//
// Such a worker is started as `towerps-launch --exec-worker-cmd CMD <worker flags>`: the flags
// a towerps-worker would get (rank, servers, job and worker options, and a restarted worker's
// --ready-file, which the supervisor appends). That entry exports them as JSON in
// TOWERPS_WORKER_ARGS and replaces itself (exec) with `/bin/sh -c CMD`, so the script's process
// is the one the launcher watches, signals and restarts, and tps.init() reads its options from
// the environment. The job's secret stays in TOWERPS_SECRET_FILE, never on a command line.
//
// Contract: pure argv builders and one exec entry, called by main() before its own parsing.
#ifndef TOWERPS_LAUNCH_WORKER_CMD_H_
#define TOWERPS_LAUNCH_WORKER_CMD_H_

#include <string>
#include <vector>

namespace towerps::launch {

inline constexpr char kExecWorkerCmdFlag[] = "--exec-worker-cmd";

// The argv of a --worker-cmd worker: `worker_argv` (a towerps-worker's, binary first) with the
// binary replaced by this launcher in its exec mode.
std::vector<std::string> WorkerCmdArgv(const std::string& worker_cmd,
                                       const std::vector<std::string>& worker_argv);

// `towerps-launch --exec-worker-cmd CMD ARGS...`: exports ARGS and execs CMD through /bin/sh.
// Returns only when that fails: 127, having said why on stderr.
int ExecWorkerCmd(int argc, char** argv);

// The arguments as TOWERPS_WORKER_ARGS holds them: a JSON array of strings.
std::string WorkerArgsJson(const std::vector<std::string>& args);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_WORKER_CMD_H_
