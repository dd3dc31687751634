// Subprocess: a child process started from an argv, with its output sent to a file.
//
// Contract: move-only owner of one child. The destructor kills (SIGKILL) and reaps a child that
// is still running, so no test or launcher leaks processes. Wait() never blocks past its
// deadline. Not thread-safe; one owner thread.
//
// A child also dies with its parent: it gets `parent_death_signal` (Linux's PR_SET_PDEATHSIG)
// when this process ends, however it ends, SIGKILL included, and it exits at once if the parent
// was already gone before it could ask. The kernel ties that signal to the *thread* that called
// Start(), so start a long-lived child from a thread that lives as long as it should.
#ifndef TOWERPS_COMMON_SUBPROCESS_H_
#define TOWERPS_COMMON_SUBPROCESS_H_

#include <signal.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/deadline.h"
#include "towerps/result.h"

namespace towerps {

struct SubprocessOptions {
  std::vector<std::string> argv;       // argv[0] is the program path
  std::vector<std::string> extra_env;  // "NAME=value" over the parent's environment (wins)
  std::string output_path;             // stdout+stderr go here; empty: inherit
  bool capture_output = false;         // stdout+stderr into a pipe instead (output_fd())
  bool new_process_group = true;       // so a signal can reach the whole tree
  // stdin is a pipe whose write end this object holds (CloseStdin()); the child reads EOF
  // once it is closed, or once this process dies. Otherwise stdin is inherited.
  bool stdin_pipe = false;
  // The signal the child gets when this process dies (SIGTERM: a server writes its final
  // checkpoint); 0 lets it outlive us, for a daemon.
  int parent_death_signal = SIGTERM;
  // The CPUs the child may run on (set before exec, so every thread it starts inherits them;
  // also by the parent, so that they show in /proc once Start returns); empty: this process's.
  // The kernel keeps those of them the child's cpuset allows; with none left the child exits
  // 126 before exec.
  std::vector<int> cpus;
};

class Subprocess {
 public:
  static Result<Subprocess> Start(const SubprocessOptions& options);
  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&& other) noexcept;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  // Read end of the output pipe (non-blocking) when capture_output was set, else -1. Owned here.
  int output_fd() const { return output_fd_; }
  // Writes `data` to the stdin pipe (stdin_pipe), all of it or an error; for short messages
  // (at most PIPE_BUF bytes, so the write never blocks on an empty pipe).
  Status WriteStdin(std::string_view data);
  // Closes the write end of the stdin pipe (stdin_pipe): the child reads EOF. Idempotent.
  void CloseStdin();
  // Sends `signal` to the child (and its group when it has one). No-op after exit.
  void Signal(int signal);
  // Exit code (0..255), or 128 + signal number when killed; nullopt while running at the deadline.
  std::optional<int> Wait(Deadline deadline);
  // Non-blocking check.
  std::optional<int> Poll();
  bool running() { return !Poll().has_value(); }

 private:
  Subprocess(pid_t pid, bool group, int output_fd, int stdin_fd)
      : pid_(pid), output_fd_(output_fd), stdin_fd_(stdin_fd), group_(group) {}
  pid_t pid_ = -1;
  int output_fd_ = -1;
  int stdin_fd_ = -1;
  bool group_ = false;
  std::optional<int> exit_code_;
};

}  // namespace towerps

#endif  // TOWERPS_COMMON_SUBPROCESS_H_
