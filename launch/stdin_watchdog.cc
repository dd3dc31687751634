#include "launch/stdin_watchdog.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "common/command_line.h"
#include "common/job_secret.h"
#include "common/subprocess.h"
#include "launch/gpus.h"

namespace po = boost::program_options;

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

// Reads one line (at most `max` bytes) from stdin, byte by byte so nothing after it is consumed.
Result<std::string> ReadStdinLine(size_t max, Deadline deadline) {
  std::string line;
  while (line.size() < max) {
    pollfd fd{STDIN_FILENO, POLLIN, 0};
    const int n = poll(&fd, 1, static_cast<int>(deadline.remaining_ms()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return TimeoutError("no job secret arrived on stdin in time");
    char c;
    const ssize_t got = read(STDIN_FILENO, &c, 1);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return IoError("stdin closed before the job secret arrived");
    if (c == '\n') return line;
    line += c;
  }
  return InvalidArgumentError("the first line on stdin is too long to be a job secret");
}

// The secret's private copy on this host; removed with its directory on destruction.
class SecretCopy {
 public:
  static Result<std::unique_ptr<SecretCopy>> FromStdin() {
    TOWERPS_ASSIGN_OR_RETURN(std::string line,
                             ReadStdinLine(128, Deadline::After(std::chrono::seconds(60))));
    TOWERPS_ASSIGN_OR_RETURN(JobSecret secret, JobSecret::FromText(line, "from stdin"));
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/towerps-secret-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) {
      return IoError("cannot create a private directory for the job secret in " + dir + ": " +
                     std::strerror(errno));
    }
    auto copy = std::unique_ptr<SecretCopy>(new SecretCopy(dir));
    TOWERPS_RETURN_IF_ERROR(secret.Save(copy->path()));
    return copy;
  }
  ~SecretCopy() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path() const { return dir_ + "/secret"; }

 private:
  explicit SecretCopy(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

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
  std::unique_ptr<SecretCopy> secret;
  if (o.secret_from_stdin) {
    Result<std::unique_ptr<SecretCopy>> copy = SecretCopy::FromStdin();
    if (!copy.ok()) {
      std::fprintf(stderr, "towerps-launch --stdin-watchdog: %s\n",
                   copy.status().ToString().c_str());
      return 127;
    }
    secret = std::move(copy).value();
    so.extra_env.push_back("TOWERPS_SECRET_FILE=" + secret->path());
  }
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

// towerps-launch --stdin-watchdog [--grace-ms N] [--chdir DIR] [--gpu-rank K] -- COMMAND...
int WatchdogMain(int argc, char** argv, const std::atomic<int>* interrupt) {
  WatchdogOptions o;
  long grace_ms = o.grace.count();
  po::options_description desc(
      "Usage: towerps-launch --stdin-watchdog [options] -- COMMAND [ARGS...]\n\n"
      "Runs COMMAND and stops it (SIGTERM, then SIGKILL after the grace period) when stdin\n"
      "closes: the remote end of `towerps-launch --hostfile`, so an ssh session that ends takes\n"
      "its process with it");
  desc.add_options()("help,h", "show this help")("stdin-watchdog", "this mode")(
      "grace-ms", po::value(&grace_ms)->default_value(grace_ms), "SIGTERM to SIGKILL")(
      "chdir", po::value(&o.chdir), "run COMMAND in this directory when it exists")(
      "gpu-rank", po::value(&o.gpu_rank), "set CUDA_VISIBLE_DEVICES for this local rank")(
      "gpus", po::value(&o.gpu_count)->default_value(o.gpu_count), "GPUs for that rank")(
      "env", po::value(&o.env)->composing(), "NAME=value for COMMAND's environment (repeatable)")(
      "secret-from-stdin", po::bool_switch(&o.secret_from_stdin),
      "the first line of stdin is the job's secret; COMMAND gets it as TOWERPS_SECRET_FILE");
  int split = 1;
  while (split < argc && std::string(argv[split]) != "--") ++split;
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(split, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (po::error& e) {
    std::cerr << "towerps-launch --stdin-watchdog: " << ProgramOptionsErrorText(e) << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (split + 1 >= argc) {
    std::cerr << "towerps-launch --stdin-watchdog: give the command after --\n";
    return 2;
  }
  o.argv.assign(argv + split + 1, argv + argc);
  o.grace = std::chrono::milliseconds(grace_ms);
  o.interrupt = interrupt;
  return RunStdinWatchdog(o);
}

}  // namespace towerps::launch
