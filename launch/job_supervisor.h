// JobSupervisor: watches a started job (servers first in the ProcessGroup, then workers) until
// it ends, the same way for every launcher that owns its processes (local and hostfile modes).
//
// - A worker killed by a signal (SIGKILL, the OOM killer, a crash) is restarted under the
//   RestartPolicy: at most `max_restarts` times per worker, each time with `--ready-file`, which
//   it must write (having rejoined the job) within `timeout`; the launcher says what happened
//   ("worker:2 was killed by SIGKILL; restarting it (1 of 3)"). A worker that exits with a code
//   of its own (an error it reported) is not restarted: it would fail again.
// - A process that fails otherwise stops the job: the others are asked to stop (ProcessGroup::Stop,
// then
//   SIGKILL after `grace`), its last lines are printed, and the error names it and its host and
//   says what happened: "worker:2 exited with code 1: <its last error line>" or "worker:2 was
//   killed by SIGKILL". Such errors are kFailedPrecondition (the job's process failed), never
//   kInternal, which stays for bugs in TowerPS itself.
// - When every worker has exited 0, the servers are asked to stop (they write their final
//   checkpoint) and the job succeeds only if they exit 0 as well.
// - A non-zero *interrupt (set by the entry point's signal handler) stops the job the same way.
//
// Contract: one owner thread; borrows the group and the interrupt flag. Every method that
// returns an error has stopped every process first.
#ifndef TOWERPS_LAUNCH_JOB_SUPERVISOR_H_
#define TOWERPS_LAUNCH_JOB_SUPERVISOR_H_

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "launch/process_group.h"
#include "towerps/status.h"

namespace towerps::launch {

struct RestartPolicy {
  int max_restarts = 0;  // per process; 0: a dead process fails the job
  // Servers too (they restore their last checkpoint); only with --checkpoint-dir, without which
  // a server's state dies with it.
  bool restart_servers = false;
  std::chrono::milliseconds timeout{30000};
  // A restarted worker gets "<run dir>/<tag>.ready" (next to its log) as its --ready-file.
  // False: not tracked (its files are on another host); the other workers' RPC deadlines bound
  // the wait instead.
  bool track_rejoins = false;
  std::string process_table;  // processes.txt: a restarted worker's new pid is appended
  // --ps-replicas 2, per server: what its death means ("its chunks fail over to ps:0"). A
  // restarted server then gets --rejoin, and one that exits kExitReplaced (its backup took
  // over while it lived) is restarted as if killed.
  std::vector<std::string> failover;
};

class JobSupervisor {
 public:
  JobSupervisor(ProcessGroup* group, std::chrono::milliseconds grace,
                const std::atomic<int>* interrupt);

  // Records where child i runs, for messages ("" for this machine).
  void SetHost(size_t i, std::string host);
  bool interrupted() const { return interrupt_ && interrupt_->load() != 0; }
  // Prints child i's last lines, stops the job and returns an error naming child i.
  Status Fail(size_t i, const std::string& what);
  // Fail() for child i, which exited with `code` (`when`, if not empty, follows the exit):
  // kInvalidArgument when the code is 2 (the child refused its input), else kFailedPrecondition.
  Status FailExited(size_t i, int code, const std::string& when = "");
  // Stops the job after a signal.
  Status Cancel();
  // An error (after stopping the job) if any child has exited; `when` ends the message.
  Status CheckNoneExited(const std::string& when);
  void SetRestartPolicy(RestartPolicy policy) { policy_ = std::move(policy); }
  // Runs the job to its end. Children [0, first_worker) are servers.
  Status RunToCompletion(size_t first_worker);
  // Restarts so far, per child index.
  const std::map<size_t, int>& restarts() const { return restarts_; }

 private:
  std::string Name(size_t i) const;
  // A worker that exited with `code`: restarts it when the policy allows, else fails the job.
  Status HandleWorkerDeath(size_t i, int code);
  // The same for a server (children [0, first_worker)).
  Status HandleServerDeath(size_t i, int code);
  // Restarts child i for its n-th time, saying so; `extra` goes at the end of its command.
  Status Restart(size_t i, int code, const std::string& how, std::vector<std::string> extra);
  // Restarted workers that have written their ready file are done; one past the timeout fails.
  Status CheckRejoins();
  std::string ReadyFile(size_t i) const;
  // Prints child i's last lines and stops every process.
  void StopJob(size_t i, const std::string& what);

  ProcessGroup* group_;
  std::chrono::milliseconds grace_;
  const std::atomic<int>* interrupt_;
  std::vector<std::string> hosts_;
  RestartPolicy policy_;
  std::map<size_t, int> restarts_;
  std::map<size_t, Deadline> rejoining_;  // restarted workers not yet ready
};

// How a child's exit code (Subprocess: 128 + signal when killed) reads: "exited with code 1",
// "was killed by SIGKILL".
std::string DescribeExit(int code);

// The last line of `tail` (a child's output, oldest first) that common/logging wrote at error
// level, as its message without prefix, level and time; else the last non-empty line; else "".
std::string LastErrorLine(const std::vector<std::string>& tail);

// What the launcher prints when it stops the job for child `name`: "[launch] <name> <what>;" then
// the last lines of its log, indented, or that it printed nothing, then "stopping the job".
std::string StopReport(const std::string& name, const std::string& what,
                       const std::string& log_path, const std::vector<std::string>& tail);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_JOB_SUPERVISOR_H_
