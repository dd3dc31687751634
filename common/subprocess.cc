#include "common/subprocess.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>
#include <thread>

namespace towerps {
namespace {

// This process's environment with `extra_env` ("NAME=value") over it.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra_env) {
  std::vector<std::string> env;
  auto name_of = [](std::string_view kv) { return kv.substr(0, kv.find('=')); };
  for (char** e = environ; *e != nullptr; ++e) {
    bool overridden = false;
    for (const std::string& x : extra_env) overridden |= name_of(x) == name_of(*e);
    if (!overridden) env.emplace_back(*e);
  }
  for (const std::string& e : extra_env) env.push_back(e);
  return env;
}

Result<cpu_set_t> CpuSet(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cores) {
    if (c < 0 || c >= CPU_SETSIZE) return InvalidArgumentError("no core " + std::to_string(c));
    CPU_SET(c, &set);
  }
  return set;
}

}  // namespace

Result<Subprocess> Subprocess::Start(const SubprocessOptions& options) {
  if (options.argv.empty()) return InvalidArgumentError("Subprocess::Start with an empty argv");
  TOWERPS_ASSIGN_OR_RETURN(const cpu_set_t cpus, CpuSet(options.cpus));
  int out_fd = -1;
  int pipe_read = -1;
  if (options.capture_output) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return IoError(std::string("pipe: ") + std::strerror(errno));
    pipe_read = fds[0];
    out_fd = fds[1];
    fcntl(pipe_read, F_SETFL, O_NONBLOCK);
  } else if (!options.output_path.empty()) {
    out_fd = open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out_fd < 0) {
      return IoError(options.output_path + ": cannot create: " + std::strerror(errno));
    }
  }
  int stdin_read = -1;
  int stdin_write = -1;
  if (options.stdin_pipe) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
      if (out_fd >= 0) close(out_fd);
      if (pipe_read >= 0) close(pipe_read);
      return IoError(std::string("pipe: ") + std::strerror(errno));
    }
    stdin_read = fds[0];
    stdin_write = fds[1];
  }
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = ChildEnvironment(options.extra_env);
  std::vector<char*> envp;
  for (std::string& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out_fd, pipe_read, stdin_read, stdin_write}) {
      if (fd >= 0) close(fd);
    }
    return ResourceExhaustedError(std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    if (options.parent_death_signal != 0) {
      prctl(PR_SET_PDEATHSIG, options.parent_death_signal);
      if (getppid() != parent) _exit(128 + options.parent_death_signal);  // died before prctl
    }
    if (options.new_process_group) setpgid(0, 0);
    if (out_fd >= 0) {
      dup2(out_fd, STDOUT_FILENO);
      dup2(out_fd, STDERR_FILENO);
    }
    if (stdin_read >= 0) dup2(stdin_read, STDIN_FILENO);
    if (!options.cpus.empty() && sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
      const char msg[] = "cannot bind to the cores asked (sched_setaffinity)\n";
      ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
      (void)w;
      _exit(126);
    }
    execve(argv[0], argv.data(), envp.data());
    const char msg[] = "exec failed: ";
    ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    w = write(STDERR_FILENO, argv[0], strlen(argv[0]));
    (void)w;
    _exit(127);
  }
  if (options.new_process_group) setpgid(pid, pid);  // also in the parent: no race on Signal()
  // Also here: the child is bound once this returns (it binds itself before exec, so that every
  // thread it starts inherits the cores).
  if (!options.cpus.empty()) sched_setaffinity(pid, sizeof(cpus), &cpus);
  if (out_fd >= 0) close(out_fd);
  if (stdin_read >= 0) close(stdin_read);
  return Subprocess(pid, options.new_process_group, pipe_read, stdin_write);
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(other.pid_),
      output_fd_(other.output_fd_),
      stdin_fd_(other.stdin_fd_),
      group_(other.group_),
      exit_code_(other.exit_code_) {
  other.pid_ = -1;
  other.output_fd_ = -1;
  other.stdin_fd_ = -1;
}

Subprocess& Subprocess::operator=(Subprocess&& other) noexcept {
  if (this != &other) {
    this->~Subprocess();
    pid_ = other.pid_;
    output_fd_ = other.output_fd_;
    stdin_fd_ = other.stdin_fd_;
    group_ = other.group_;
    exit_code_ = other.exit_code_;
    other.pid_ = -1;
    other.output_fd_ = -1;
    other.stdin_fd_ = -1;
  }
  return *this;
}

Subprocess::~Subprocess() {
  if (pid_ > 0 && !Poll().has_value()) {
    Signal(SIGKILL);
    Wait(Deadline::After(std::chrono::seconds(10)));
  }
  if (output_fd_ >= 0) close(output_fd_);
  CloseStdin();
}

Status Subprocess::WriteStdin(std::string_view data) {
  if (stdin_fd_ < 0) return FailedPreconditionError("the child's stdin is not a pipe");
  if (data.size() > PIPE_BUF) return InvalidArgumentError("stdin message over PIPE_BUF bytes");
  ssize_t n;
  do {
    n = write(stdin_fd_, data.data(), data.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(data.size())) {
    return IoError("cannot write to the stdin of pid " + std::to_string(pid_) + ": " +
                   (n < 0 ? std::strerror(errno) : "short write"));
  }
  return Status::Ok();
}

void Subprocess::CloseStdin() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  stdin_fd_ = -1;
}

void Subprocess::Signal(int sig) {
  if (pid_ <= 0 || exit_code_.has_value()) return;
  if (group_) {
    kill(-pid_, sig);
  } else {
    kill(pid_, sig);
  }
}

std::optional<int> Subprocess::Poll() {
  if (pid_ <= 0 || exit_code_.has_value()) return exit_code_;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (group_) kill(-pid_, SIGKILL);  // reap stragglers the child left in its group
  }
  return exit_code_;
}

std::optional<int> Subprocess::Wait(Deadline deadline) {
  for (;;) {
    if (auto code = Poll()) return code;
    if (deadline.expired()) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace towerps
