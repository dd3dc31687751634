#include "launch/stdin_watchdog.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "common/subprocess.h"
#include "launch/gpus.h"

namespace towerps::launch {
namespace {

// True once stdin reached EOF or failed; drains and ignores anything written to it.
bool StdinClosed(int timeout_ms) {
  pollfd fd{STDIN_FILENO, POLLIN, 0};
  const int n = poll(&fd, 1, timeout_ms);
  if (n < 0) return errno != EINTR;
  if (n == 0) return false;
  if (fd.revents & POLLNVAL) return true;
  char buf[4096];
  const ssize_t got = read(STDIN_FILENO, buf, sizeof(buf));
  return got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN);
}

}  // namespace

int RunStdinWatchdog(const WatchdogOptions& o) {
  if (o.argv.empty()) {
    std::fprintf(stderr, "towerps-launch --stdin-watchdog: no command after --\n");
    return 127;
  }
  std::error_code ec;
  if (!o.chdir.empty() && std::filesystem::is_directory(o.chdir, ec)) {
    if (chdir(o.chdir.c_str()) != 0) std::perror(o.chdir.c_str());
  }
  SubprocessOptions so;
  so.argv = o.argv;
  so.new_process_group = true;
  so.extra_env = o.env;
  if (o.gpu_rank >= 0 && o.gpu_count > 0) {
    if (const std::string gpu = GpusForRank(o.gpu_rank, o.gpu_count); !gpu.empty())
      so.extra_env.push_back("CUDA_VISIBLE_DEVICES=" + gpu);
  }
  Result<Subprocess> child = Subprocess::Start(so);
  if (!child.ok()) {
    std::fprintf(stderr, "towerps-launch --stdin-watchdog: %s\n",
                 child.status().ToString().c_str());
    return 127;
  }
  bool stdin_open = true;
  for (;;) {
    if (std::optional<int> code = child->Poll()) return *code;
    const bool interrupted = o.interrupt && o.interrupt->load() != 0;
    if (stdin_open && StdinClosed(100)) stdin_open = false;
    if (!stdin_open || interrupted) break;
  }
  // The launcher is gone or asked us to stop: SIGTERM, a grace period, then SIGKILL.
  child->Signal(SIGTERM);
  if (std::optional<int> code = child->Wait(Deadline::After(o.grace))) return *code;
  std::fprintf(stderr,
               "towerps-launch --stdin-watchdog: %s did not stop within %lld ms; killing it\n",
               o.argv[0].c_str(), static_cast<long long>(o.grace.count()));
  child->Signal(SIGKILL);
  return child->Wait(Deadline::After(std::chrono::seconds(10))).value_or(137);
}

}  // namespace towerps::launch
