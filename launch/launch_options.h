// LaunchOptions: what towerps-launch was asked to run, shared by every mode (local, hostfile
// over ssh, and the process-per-rank modes), and the command lines each mode gives its servers
// and workers, so every process of a job gets the same job configuration.
//
// Contract: plain values filled by the entry point. ValidateLaunchOptions checks them before
// any process starts; errors name the flag and the bad value. The argv builders are pure.
#ifndef TOWERPS_LAUNCH_LAUNCH_OPTIONS_H_
#define TOWERPS_LAUNCH_LAUNCH_OPTIONS_H_

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/transport.h"
#include "job/job_config.h"
#include "launch/job_supervisor.h"
#include "towerps/registry.h"
#include "towerps/status.h"
#include "worker/worker_options.h"

namespace towerps::launch {

struct LaunchOptions {
  ps::JobConfig job;
  worker::WorkerOptions worker;
  std::string run_dir;                    // empty: runs/<date>-<time>-<pid>
  std::vector<std::string> command_line;  // as given, for the run directory's job.json
  std::string bind = "127.0.0.1";         // servers listen here
  int base_port = 0;                      // 0: free ports; else server r listens on base_port + r
  std::string server_threads = "auto";    // each server's --threads: N, or auto (its host's)
  std::string checkpoint_dir;
  int64_t checkpoint_every = 0;
  // Where the chief stops the servers (--mpi, --slurm, --cluster): how long they wait for the
  // other workers to leave (the servers' --shutdown-grace-ms).
  int64_t shutdown_grace_ms = 60000;
  std::string server_binary;  // empty: towerps-server next to this executable
  std::string worker_binary;  // empty: towerps-worker next to this executable
  // --worker-cmd: every worker is this command (a PyTorch script using the towerps package)
  // instead of a worker binary; launch/worker_cmd.h. Empty: the worker binary.
  std::string worker_cmd;
  // Its own flags as given (Registry::AddOption): "--name", "value", ..., for every worker.
  std::vector<std::string> worker_binary_args;
  // Security (docs/SECURITY.md). Unless `insecure`, every process gets the job's secret through
  // TOWERPS_SECRET_FILE: `secret_file` when given, else a new one in the run directory (local
  // and hostfile modes). The process-per-rank modes need `secret_file`, shared by all nodes.
  std::string secret_file;
  bool insecure = false;
  bool encrypt = false;                            // CURVE encryption, keys derived from the secret
  TransportPath transport = TransportPath::kAuto;  // --transport, handed to every process
  // Local and hostfile jobs on a terminal: the chief sends progress lines and the launcher draws
  // one bar for the job (launch/job_progress.h).
  bool job_progress_bar = false;
  LogLevel log_level = LogLevel::kInfo;  // --log-level: the launcher's and every process's
  std::chrono::milliseconds grace{10000};
  std::chrono::milliseconds startup_timeout{60000};
  // Fault tolerance (local and hostfile modes; every update mode): a worker killed by a signal is
  // restarted at most max_restarts times (0: fail fast) and must rejoin within restart_timeout,
  // which must be shorter than the workers' --rpc-timeout-ms (the others wait that long).
  int max_restarts = 3;
  std::chrono::milliseconds restart_timeout{30000};
  const std::atomic<int>* interrupt = nullptr;  // borrowed; non-zero: the signal received
  // Every process runs on this machine (local mode): data the workers cannot read here is an
  // error before anything starts, not a note (see CheckJobWithWorkerBinary).
  bool all_local = false;
};

// Checks the launcher's own options (ports, binaries, counts) before anything starts.
Status ValidateLaunchOptions(const LaunchOptions& options);

// Asks the worker binary (`--check-job` with the job's flags) whether --model and --dataset exist
// and fit each other; kInvalidArgument with the binary's reason when not. Data that cannot be
// read here is kInvalidArgument naming --data-dir when options.all_local; otherwise (a
// remote-only --data-dir) it is left to the workers, with a note.
Status CheckJobWithWorkerBinary(const LaunchOptions& options);

// What a worker binary printed (stdout and stderr) and its exit code, run with `argv` (the
// binary first) for at most `timeout`: how the launcher asks it about its own registry.
struct WorkerAnswer {
  int code = 0;
  std::string text;  // without trailing newlines
};
Result<WorkerAnswer> AskWorkerBinary(const std::vector<std::string>& argv,
                                     std::chrono::milliseconds timeout);

// The flags a worker binary declares of its own (its --list-choices "options").
Result<std::vector<std::pair<std::string, OptionDef>>> WorkerBinaryOptions(
    const std::string& worker_binary, std::chrono::milliseconds timeout);

// The job flags (names without "--") and values `model` recommends (ModelDef::recommended), from
// the stock registry or, with a worker binary, its --list-choices; empty for a model without
// any, an unknown one, or a binary that does not say.
Result<std::map<std::string, std::string>> RecommendedFlags(const std::string& worker_binary,
                                                            const std::string& model,
                                                            std::chrono::milliseconds timeout);

// `towerps-launch --list-choices`: the names the stock worker accepts, or, with --worker-bin,
// those that binary's registry accepts (it is asked: `B --list-choices`).
Result<std::string> ListChoices(const std::string& worker_binary,
                                std::chrono::milliseconds timeout);

// The job's secret file as an absolute path: options.secret_file (checked to be loadable), or a
// new one, "<run_dir>/secret" (mode 0600). Empty with --insecure.
Result<std::string> PrepareJobSecret(const LaunchOptions& options, const std::string& run_dir);

// How the supervisor of a local or hostfile job restarts its workers (see RestartPolicy).
RestartPolicy MakeRestartPolicy(const LaunchOptions& options, const std::string& run_dir,
                                bool workers_local);

// Adds "restarts" (their number) and "restarted" ({"worker:2": 1}) to the chief's JSON summary
// (--summary-out), if it asked for one and restarts happened. An error only if it cannot be
// rewritten.
Status RecordRestartsInSummary(const LaunchOptions& options,
                               const std::map<std::string, int>& restarts);

// runs/<date>-<time>-<pid>, relative to the working directory.
std::string DefaultRunDir();
// Creates the run directory and says where it is ("[launch] run directory: ..."). A directory
// used before keeps the earlier run's files in previous-<k>/ (said too), so a rerun into it
// starts clean (a new job secret, new logs) and loses nothing.
Status CreateRunDir(const std::string& run_dir);
// Writes <run_dir>/job.json: the launcher's command line as given ("command"), every job option
// as resolved ("job", only the mode's own), the workers' options that differ from their defaults
// ("worker_options"), the transport and the TowerPS version. kIoError when it cannot.
Status WriteJobRecord(const LaunchOptions& options, const std::string& run_dir);
// Whether `run_dir` can be made (or used): kInvalidArgument naming the part of the path that is
// not a directory or not writable. CreateRunDir checks it first; the launchers' Check() too.
Status CheckRunDir(const std::string& run_dir);

// The binaries, resolved (next to this executable unless given).
std::string ServerBinary(const LaunchOptions& options);
std::string WorkerBinary(const LaunchOptions& options);

// towerps-server for server `rank`, listening on options.bind:port, with the job's options;
// `peers`: every server's endpoint, for --ps-replicas 2.
std::vector<std::string> ServerArgv(const LaunchOptions& options, int rank, int port,
                                    const std::vector<std::string>& peers = {});
// The job's and the workers' flags, as every worker (and its --check-job) gets them.
std::vector<std::string> WorkerJobArgs(const LaunchOptions& options);
// Examples the whole job processes per step of the chief (sync: batch x gradients per step;
// async and SSP: batch x workers), for the progress bar's rate.
int64_t ExamplesPerChiefStep(const ps::JobConfig& job);
// towerps-worker for worker `rank`, with the servers' endpoints (by server rank); the chief
// gets --progress-lines with job_progress_bar.
std::vector<std::string> WorkerArgv(const LaunchOptions& options, int rank,
                                    const std::vector<std::string>& endpoints);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_LAUNCH_OPTIONS_H_
