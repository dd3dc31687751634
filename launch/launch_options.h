// LaunchOptions: what towerps-launch was asked to run, shared by every mode (local, hostfile
// over ssh, and the process-per-rank modes), and their validation. What is made from them lives
// beside it, one concern a file: the command lines of the servers and workers
// (launch/command_lines.h), the questions to the worker binary (launch/worker_binary.h), and
// what a job leaves on disk (launch/job_record.h).
//
// Contract: plain values filled by the entry point. ValidateLaunchOptions checks them before
// any process starts; errors name the flag and the bad value.
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
#include "launch/worker_cmd.h"
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
  int64_t checkpoint_full_every = 1;  // the servers' --checkpoint-full-every
  // Tables with storage=rocksdb: every server's --table-dir (each keeps its tier in ps-<rank>).
  std::string table_dir;
  // Where the chief stops the servers (--mpi, --slurm, --cluster): how long they wait for the
  // other workers to leave (the servers' --shutdown-grace-ms).
  static constexpr int64_t kDefaultShutdownGraceMs = 60000;
  int64_t shutdown_grace_ms = kDefaultShutdownGraceMs;
  // Where no launcher stays behind to stop them (--mpi, --slurm, --cluster: RankLauncher clears
  // `launcher_stops_servers`), every server stops, failing, once it has heard from no worker
  // for this long (the servers' --orphan-timeout-ms), so none outlives a job whose workers
  // died; 0: never. A launcher that stays stops its servers itself, however slow its workers.
  int64_t orphan_timeout_ms = 600000;
  bool launcher_stops_servers = true;
  std::string server_binary;  // empty: towerps-server next to this executable
  std::string worker_binary;  // empty: towerps-worker next to this executable
  // --worker-cmd: every worker is this command (a PyTorch script using the towerps package)
  // instead of a worker binary; launch/worker_cmd.h. Empty: the worker binary.
  std::string worker_cmd;
  // --worker-allocator: the malloc of a --worker-cmd worker's process (launch/worker_cmd.h).
  WorkerAllocator worker_allocator = WorkerAllocator::kAuto;
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
  // --bind-cores (local mode): each worker on its own slice of this machine's cores, server j on
  // worker j's slice (launch/core_binding.h).
  bool bind_cores = false;
};

// Checks the launcher's own options (ports, binaries, counts) before anything starts.
Status ValidateLaunchOptions(const LaunchOptions& options);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_LAUNCH_OPTIONS_H_
