// What the launcher suites that start real jobs share (local_launcher_test, rank_modes_test,
// slurm_test, ssh_hosts_test): the built binaries, a scratch directory, starting a process with
// its output in a file, waiting for it, and reading what it wrote.
//
// Each suite is compiled with TOWERPS_LAUNCH_BIN, the path of the built towerps-launch;
// towerps-server and towerps-worker are next to it (tests/CMakeLists.txt: towerps_launch_test).
#ifndef TOWERPS_TESTS_LAUNCH_LAUNCH_FIXTURE_H_
#define TOWERPS_TESTS_LAUNCH_LAUNCH_FIXTURE_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/subprocess.h"

namespace towerps::launch_test {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

// The built towerps-launch, and the directory of every built binary.
inline const std::string kLaunchBin = TOWERPS_LAUNCH_BIN;
inline std::string BinDir() { return fs::path(kLaunchBin).parent_path().string(); }

// Whether the real workers have their data; the suites that train skip with kNoFashionMnist.
inline bool HaveFashionMnist() {
  return fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
}
inline constexpr char kNoFashionMnist[] =
    "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";

// A whole file; "" when it does not exist (yet).
inline std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An empty directory <tmp>/<name>_<pid>, removed with everything in it at destruction unless
// TOWERPS_KEEP_TEST_DIR is set.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    if (!std::getenv("TOWERPS_KEEP_TEST_DIR")) fs::remove_all(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }
  std::string Read(const std::string& name) const { return ReadFile(path_ / name); }

 private:
  fs::path path_;
};

// Starts argv with stdout and stderr into `output` and `env` ("NAME=value") added to this
// process's environment.
inline Result<Subprocess> StartProcess(std::vector<std::string> argv, const fs::path& output,
                                       std::vector<std::string> env = {}) {
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.output_path = output.string();
  o.extra_env = std::move(env);
  return Subprocess::Start(o);
}

// Runs argv to its end: its exit code, or an error when it did not start or did not end
// within `limit` (it is then killed).
inline Result<int> RunProcess(std::vector<std::string> argv, const fs::path& output,
                              std::vector<std::string> env, seconds limit) {
  const std::string argv0 = argv.empty() ? "" : argv[0];
  TOWERPS_ASSIGN_OR_RETURN(Subprocess p, StartProcess(std::move(argv), output, std::move(env)));
  const std::optional<int> code = p.Wait(Deadline::After(limit));
  if (!code) {
    return TimeoutError(argv0 + " still running after " + std::to_string(limit.count()) +
                        " s; its output is in " + output.string());
  }
  return *code;
}

// The pids a run directory's processes.txt lists for "<role> <rank>", oldest first (a restart
// appends one).
inline std::vector<pid_t> ProcessPids(const fs::path& run_dir, const std::string& role, int rank) {
  std::vector<pid_t> pids;
  std::istringstream in(ReadFile(run_dir / "processes.txt"));
  std::string r, word;
  int k;
  pid_t pid;
  for (std::string line; std::getline(in, line);) {
    std::istringstream l(line);
    if (l >> r >> k >> word >> pid && r == role && k == rank && word == "pid") pids.push_back(pid);
  }
  return pids;
}

inline bool ProcessAlive(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

// Whether `pid` is running: alive and not a zombie. An orphan whose parent was killed is reaped
// by whatever init the machine has, which may be slow to do it, so a zombie counts as ended.
inline bool ProcessRunning(pid_t pid) {
  if (!ProcessAlive(pid)) return false;
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');  // the state follows the command's closing parenthesis
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z' &&
         stat[paren + 2] != 'X';
}

// A TCP port for a server the test starts on a fixed port: below Linux's ephemeral range
// (32768 up), where connections of concurrent tests never land, free now (a bind to it on every
// interface succeeds), and never the same twice in one test process.
inline int UnusedPort() {
  static int next = 20000 + static_cast<int>(getpid() % 12000);
  for (int tries = 0; tries < 12000; ++tries) {
    const int port = next;
    next = next + 1 >= 32768 ? 20000 : next + 1;
    const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    const bool free = s >= 0 && bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    if (s >= 0) close(s);
    if (free) return port;
  }
  return 0;
}

// Waits until `path` contains `text`; returns whether it does.
inline bool AwaitText(const fs::path& path, const std::string& text, seconds limit) {
  const Deadline deadline = Deadline::After(limit);
  while (ReadFile(path).find(text) == std::string::npos) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return true;
}

// A scratch directory per test, named after the suite and the test. The output of every process
// started with Start() goes to <dir>/<name>; on failure the test prints the files named by
// ShowOnFailure().
class LaunchTest : public ::testing::Test {
 protected:
  LaunchTest() : dir_(TestName()) {}
  void TearDown() override {
    if (!HasFailure()) return;
    for (const std::string& name : show_on_failure_) {
      std::cerr << "---- " << name << " ----\n" << dir_.Read(name);
    }
  }

  Result<Subprocess> Start(std::vector<std::string> argv, const std::string& output,
                           std::vector<std::string> env = {}) {
    return StartProcess(std::move(argv), dir_ / output, std::move(env));
  }
  void ShowOnFailure(const std::string& name) { show_on_failure_.push_back(name); }

  ScratchDir dir_;

 private:
  static std::string TestName() {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    return std::string(t->test_suite_name()) + "_" + t->name();
  }
  std::vector<std::string> show_on_failure_;
};

}  // namespace towerps::launch_test

#endif  // TOWERPS_TESTS_LAUNCH_LAUNCH_FIXTURE_H_
