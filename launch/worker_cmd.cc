#include "launch/worker_cmd.h"

#include <unistd.h>
#include <wordexp.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/sibling_executable.h"

namespace towerps::launch {

Result<WorkerAllocator> ParseWorkerAllocator(const std::string& text) {
  Result<WorkerAllocator> allocator = kWorkerAllocators.Parse(text);
  if (!allocator.ok()) {
    return InvalidArgumentError("--worker-allocator '" + text +
                                "' is not auto, tcmalloc or system");
  }
  return allocator;
}

std::string TcmallocLibrary() {
#ifdef TOWERPS_TCMALLOC_PRELOAD
  return TOWERPS_TCMALLOC_PRELOAD;
#else
  return "";
#endif
}

std::vector<std::string> WorkerCmdArgv(const std::string& worker_cmd, WorkerAllocator allocator,
                                       const std::vector<std::string>& worker_argv) {
  std::vector<std::string> argv = {SiblingExecutable("towerps-launch"), kExecWorkerCmdFlag,
                                   worker_cmd, kWorkerAllocators.Name(allocator)};
  if (!worker_argv.empty()) argv.insert(argv.end(), worker_argv.begin() + 1, worker_argv.end());
  return argv;
}

std::string WorkerArgsJson(const std::vector<std::string>& args) {
  return nlohmann::json(args).dump();
}

namespace {

// Puts `allocator`'s library first in LD_PRELOAD. False, having said why, when kTcmalloc's
// library is missing; kAuto then keeps the C library's malloc.
bool Preload(WorkerAllocator allocator) {
  if (allocator == WorkerAllocator::kSystem) return true;
  const std::string library = TcmallocLibrary();
  if (library.empty() || access(library.c_str(), R_OK) != 0) {
    if (allocator == WorkerAllocator::kAuto) return true;
    std::fprintf(stderr,
                 "towerps-launch: --worker-allocator tcmalloc: %s; install libtcmalloc-minimal4 "
                 "on this host or give --worker-allocator system\n",
                 library.empty() ? "this towerps-launch was built without tcmalloc"
                                 : (library + " cannot be read").c_str());
    return false;
  }
  const char* before = std::getenv("LD_PRELOAD");
  std::string preload = library;
  if (before != nullptr && *before != '\0') {
    if (std::string(before).find(library) != std::string::npos) return true;
    preload += ":" + std::string(before);
  }
  if (setenv("LD_PRELOAD", preload.c_str(), 1) != 0) {
    std::fprintf(stderr, "towerps-launch: cannot set LD_PRELOAD: %s\n", std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace

int ExecWorkerCmd(int argc, char** argv) {
  if (argc < 4 || argv[2][0] == '\0') {
    std::fprintf(stderr, "towerps-launch %s: no command given\n", kExecWorkerCmdFlag);
    return 127;
  }
  const Result<WorkerAllocator> allocator = ParseWorkerAllocator(argv[3]);
  if (!allocator.ok()) {
    std::fprintf(stderr, "towerps-launch %s: %s\n", kExecWorkerCmdFlag,
                 allocator.status().message().c_str());
    return 127;
  }
  if (!Preload(*allocator)) return 127;
  const std::string json = WorkerArgsJson(std::vector<std::string>(argv + 4, argv + argc));
  if (setenv("TOWERPS_WORKER_ARGS", json.c_str(), 1) != 0) {
    std::fprintf(stderr, "towerps-launch: cannot set TOWERPS_WORKER_ARGS: %s\n",
                 std::strerror(errno));
    return 127;
  }
  // A plain command (words, quotes, variables) is split as the shell would and run directly, so
  // the script is the process the launcher watches: a SIGKILL of it is seen as such, and it is
  // restarted. One with shell syntax (&&, |, ;, redirections) runs under /bin/sh instead.
  wordexp_t words;
  const int split = wordexp(argv[2], &words, WRDE_NOCMD);
  if (split == 0 && words.we_wordc > 0) {
    execvp(words.we_wordv[0], words.we_wordv);
    std::fprintf(stderr, "towerps-launch: --worker-cmd: cannot run %s: %s\n", words.we_wordv[0],
                 std::strerror(errno));
    return 127;
  }
  if (split == 0) wordfree(&words);
  execl("/bin/sh", "sh", "-c", argv[2], static_cast<char*>(nullptr));
  std::fprintf(stderr, "towerps-launch: --worker-cmd: cannot run /bin/sh: %s\n",
               std::strerror(errno));
  return 127;
}

}  // namespace towerps::launch
