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

std::vector<std::string> WorkerCmdArgv(const std::string& worker_cmd,
                                       const std::vector<std::string>& worker_argv) {
  std::vector<std::string> argv = {SiblingExecutable("towerps-launch"), kExecWorkerCmdFlag,
                                   worker_cmd};
  if (!worker_argv.empty()) argv.insert(argv.end(), worker_argv.begin() + 1, worker_argv.end());
  return argv;
}

std::string WorkerArgsJson(const std::vector<std::string>& args) {
  return nlohmann::json(args).dump();
}

int ExecWorkerCmd(int argc, char** argv) {
  if (argc < 3 || argv[2][0] == '\0') {
    std::fprintf(stderr, "towerps-launch %s: no command given\n", kExecWorkerCmdFlag);
    return 127;
  }
  const std::string json = WorkerArgsJson(std::vector<std::string>(argv + 3, argv + argc));
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
