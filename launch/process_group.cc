#include "launch/process_group.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

namespace towerps::launch {
namespace {

constexpr size_t kTailLines = 20;

std::string FileName(const std::string& tag) {
  std::string name = tag;
  for (char& c : name) {
    if (c == ':') c = '-';
  }
  return name;
}

}  // namespace

ProcessGroup::ProcessGroup(std::string log_dir) : log_dir_(std::move(log_dir)) {}

ProcessGroup::~ProcessGroup() {
  progress_.Finish();
  for (auto& c : children_) c->process.Signal(SIGKILL);
  for (auto& c : children_) c->process.Wait(Deadline::After(std::chrono::seconds(10)));
}

std::string ProcessGroup::FilePath(size_t i, const std::string& extension) const {
  return (std::filesystem::path(log_dir_) / (FileName(children_[i]->tag) + extension)).string();
}

Result<size_t> ProcessGroup::Start(ChildSpec spec) {
  SubprocessOptions o;
  o.argv = std::move(spec.argv);
  o.extra_env = std::move(spec.extra_env);
  o.cpus = std::move(spec.cpus);
  o.capture_output = true;
  o.stdin_pipe = spec.stop_by == StopBy::kClosingStdin;
  TOWERPS_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Start(o));
  if (!spec.stdin_line.empty()) {
    TOWERPS_RETURN_IF_ERROR(p.WriteStdin(spec.stdin_line).WithContext(spec.tag));
  }
  const std::string path =
      (std::filesystem::path(log_dir_) / (FileName(spec.tag) + ".log")).string();
  auto child = std::make_unique<Child>(Child{std::move(spec.tag),
                                             std::move(o),
                                             std::move(spec.stdin_line),
                                             std::move(p),
                                             spec.stop_by,
                                             {},
                                             {},
                                             {},
                                             false});
  child->log.open(path);
  if (!child->log) return IoError(path + ": cannot create the log file");
  children_.push_back(std::move(child));
  return children_.size() - 1;
}

Status ProcessGroup::Restart(size_t i, const std::vector<std::string>& extra_args) {
  Child& c = *children_[i];
  if (!c.drained) ReadFrom(c);  // the last words of the one that died
  SubprocessOptions o = c.options;
  o.argv.insert(o.argv.end(), extra_args.begin(), extra_args.end());
  TOWERPS_ASSIGN_OR_RETURN(Subprocess p, Subprocess::Start(o));
  if (!c.stdin_line.empty()) TOWERPS_RETURN_IF_ERROR(p.WriteStdin(c.stdin_line).WithContext(c.tag));
  c.process = std::move(p);
  c.partial.clear();
  c.drained = false;
  return Status::Ok();
}

void ProcessGroup::EnableProgress(const std::string& tag, int64_t examples_per_step) {
  progress_ = JobProgress(isatty(STDOUT_FILENO) != 0, examples_per_step);
  progress_tag_ = tag;
}

void ProcessGroup::EmitLine(Child& child, const std::string& line) {
  if (child.tag == progress_tag_ && progress_.Consume(line)) return;
  child.log << line << '\n';
  child.log.flush();
  const std::string prefix = "[" + child.tag + "]";
  progress_.Print(stdout, line.compare(0, prefix.size(), prefix) == 0 ? line + "\n"
                                                                      : prefix + " " + line + "\n");
  child.tail.push_back(line);
  if (child.tail.size() > kTailLines) child.tail.pop_front();
}

void ProcessGroup::ReadFrom(Child& child) {
  char buf[65536];
  for (;;) {
    const ssize_t n = read(child.process.output_fd(), buf, sizeof(buf));
    if (n > 0) {
      child.partial.append(buf, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = child.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string line = child.partial.substr(start, nl - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        EmitLine(child, line);
      }
      child.partial.erase(0, start);
      continue;
    }
    if (n == 0) {
      child.drained = true;
      if (!child.partial.empty()) {
        EmitLine(child, child.partial);
        child.partial.clear();
      }
    } else if (errno == EINTR) {
      continue;
    }
    return;  // EAGAIN: nothing more for now
  }
}

void ProcessGroup::Pump(Deadline deadline) {
  std::vector<pollfd> fds;
  std::vector<Child*> owners;
  for (auto& c : children_) {
    if (c->drained || c->process.output_fd() < 0) continue;
    fds.push_back({c->process.output_fd(), POLLIN, 0});
    owners.push_back(c.get());
  }
  if (fds.empty()) {
    // Nothing to read: wait in small steps so an exit is noticed quickly.
    const long ms = std::min<long>(deadline.remaining_ms(), 50);
    if (ms > 0) usleep(static_cast<useconds_t>(ms) * 1000);
    return;
  }
  const int timeout = static_cast<int>(std::min<long>(deadline.remaining_ms(), 100));
  if (poll(fds.data(), fds.size(), timeout) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) ReadFrom(*owners[i]);
  }
}

std::optional<int> ProcessGroup::ExitCode(size_t i) {
  Child& c = *children_[i];
  std::optional<int> code = c.process.Poll();
  if (code && !c.drained) {
    // The child is gone: its pipe holds all it will ever write (or a grandchild keeps it open,
    // which must not keep us waiting).
    ReadFrom(c);
  }
  return code;
}

bool ProcessGroup::AllExited() {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (!ExitCode(i)) return false;
  }
  return true;
}

void ProcessGroup::Signal(size_t i, int signal) { children_[i]->process.Signal(signal); }

void ProcessGroup::Stop(size_t i) {
  Child& c = *children_[i];
  if (c.stop_by == StopBy::kClosingStdin) {
    c.process.CloseStdin();
  } else {
    c.process.Signal(SIGTERM);
  }
}

void ProcessGroup::TerminateAll(std::chrono::milliseconds grace) {
  for (size_t i = 0; i < children_.size(); ++i) Stop(i);
  const Deadline deadline = Deadline::After(grace);
  while (!AllExited() && !deadline.expired()) Pump(Deadline::After(std::chrono::milliseconds(50)));
  for (auto& c : children_) c->process.Signal(SIGKILL);
  for (auto& c : children_) c->process.Wait(Deadline::After(std::chrono::seconds(10)));
  for (size_t i = 0; i < children_.size(); ++i) ExitCode(i);
}

std::vector<std::string> ProcessGroup::Tail(size_t i) const {
  const Child& c = *children_[i];
  std::vector<std::string> lines(c.tail.begin(), c.tail.end());
  if (!c.partial.empty()) lines.push_back(c.partial);  // a last line without its newline yet
  return lines;
}

}  // namespace towerps::launch
