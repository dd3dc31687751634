// ProcessGroup: the child processes of one job, each with a tag ("ps:0", "worker:3"), whose
// output is relayed line by line to stdout with a "[tag] " prefix (unless the line already
// starts with it) and kept in "<dir>/<tag>.log". The last lines of each child are remembered for
// error reports. With EnableProgress, one child's "@progress" lines are consumed to draw the
// job's progress bar below the relayed lines (launch/job_progress.h); the launcher's own
// messages go through Print() so that they do not run into the bar.
//
// A child is asked to stop (Stop(), TerminateAll()) by SIGTERM, or, for one started with
// StopBy::kClosingStdin (an ssh session whose remote side runs under the stdin watchdog), by
// closing its stdin: the remote process then gets SIGTERM from the watchdog on its own host.
//
// Contract: one owner thread. Pump() never blocks past its deadline. Destroying the group kills
// whatever still runs (SIGKILL to each child's process group), so nothing outlives it.
#ifndef TOWERPS_LAUNCH_PROCESS_GROUP_H_
#define TOWERPS_LAUNCH_PROCESS_GROUP_H_

#include <chrono>
#include <deque>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "launch/job_progress.h"

namespace towerps::launch {

enum class StopBy { kSigterm, kClosingStdin };

// One child to start: its tag, command line and environment, how it is stopped, what its stdin
// gets first (kClosingStdin only: how a secret reaches a remote process without a command
// line), and the CPUs it runs on (SubprocessOptions::cpus; empty: this process's), restarts
// included.
struct ChildSpec {
  std::string tag;
  std::vector<std::string> argv;
  std::vector<std::string> extra_env = {};
  StopBy stop_by = StopBy::kSigterm;
  std::string stdin_line = "";
  std::vector<int> cpus = {};
};

class ProcessGroup {
 public:
  explicit ProcessGroup(std::string log_dir);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  // Starts a child; returns its index.
  Result<size_t> Start(ChildSpec spec);
  // What Restart(i) runs from now on (e.g. a server's free port, fixed once it is known).
  void SetArgv(size_t i, std::vector<std::string> argv) {
    children_[i]->options.argv = std::move(argv);
  }
  // Starts child i again, as it was started (the same argv, environment and stdin line, plus
  // `extra_args` at the end), after it has exited; its output goes on to the same log and tag.
  Status Restart(size_t i, const std::vector<std::string>& extra_args = {});
  // Relays available output until the deadline (or until a child exits, which is reported
  // promptly). Returns after at most the deadline.
  void Pump(Deadline deadline);
  // The exit code of child i, if it has exited (its remaining output is relayed first).
  std::optional<int> ExitCode(size_t i);
  bool AllExited();
  // Asks child i to stop, the way it was started to be stopped.
  void Stop(size_t i);
  // Stop() to every running child, then SIGKILL to those still running after `grace`.
  void TerminateAll(std::chrono::milliseconds grace);
  void Signal(size_t i, int signal);
  // The progress lines of the child tagged `tag` (started with --progress-lines) feed a job-wide
  // bar on stdout, when stdout is a terminal.
  void EnableProgress(const std::string& tag, int64_t examples_per_step);
  // The launcher's own messages: `text` (whole lines) on `stream`, above the bar if there is one.
  void Print(std::FILE* stream, const std::string& text) { progress_.Print(stream, text); }
  // The job is over: the bar goes away.
  void FinishProgress() { progress_.Finish(); }

  size_t size() const { return children_.size(); }
  const std::string& tag(size_t i) const { return children_[i]->tag; }
  pid_t pid(size_t i) const { return children_[i]->process.pid(); }
  std::string LogPath(size_t i) const { return FilePath(i, ".log"); }
  // "<dir>/<tag>.<extension>" with the tag's ':' as '-' (worker-3.log): child i's files.
  std::string FilePath(size_t i, const std::string& extension) const;
  // The last lines child i printed, newest last.
  std::vector<std::string> Tail(size_t i) const;

 private:
  struct Child {
    std::string tag;
    SubprocessOptions options;  // how it was started, for Restart
    std::string stdin_line;
    Subprocess process;
    StopBy stop_by;
    std::ofstream log;
    std::string partial;           // output after the last newline
    std::deque<std::string> tail;  // last kTailLines lines
    bool drained = false;          // EOF seen on the pipe
  };
  void ReadFrom(Child& child);
  void EmitLine(Child& child, const std::string& line);

  std::string log_dir_;
  std::vector<std::unique_ptr<Child>> children_;
  JobProgress progress_{false, 1};
  std::string progress_tag_;
};

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_PROCESS_GROUP_H_
