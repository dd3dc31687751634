// towerps-launch as users run it: the real binary, real servers, and a stand-in worker.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

class LauncherTest : public LaunchTest {
 protected:
  void SetUp() override { ShowOnFailure("launch.out"); }

  // towerps-launch with the stand-in worker, its run directory in <dir>/run and its output in
  // <dir>/launch.out.
  Result<Subprocess> Launch(const std::vector<std::string>& args,
                            std::vector<std::string> env = {}) {
    std::vector<std::string> argv = {kLaunchBin, "--worker-bin", FAKE_WORKER_BIN, "--run-dir",
                                     RunDir(),   "--grace-ms",   "3000"};
    argv.insert(argv.end(), args.begin(), args.end());
    return Start(argv, "launch.out", std::move(env));
  }
  // The launcher's last line of output.
  std::string LastLine() const {
    std::string out = Output();
    while (!out.empty() && out.back() == '\n') out.pop_back();
    return out.substr(out.rfind('\n') + 1);
  }
  std::string RunDir() const { return (dir_ / "run").string(); }
  std::string Output() const { return dir_.Read("launch.out"); }
  // pid of every process the launcher started, from processes.txt.
  std::vector<std::pair<std::string, pid_t>> Processes() const {
    std::vector<std::pair<std::string, pid_t>> out;
    std::ifstream in(dir_ / "run" / "processes.txt");
    std::string role, word, log;
    int rank;
    pid_t pid;
    while (in >> role >> rank >> word >> pid >> word >> log) {
      out.emplace_back(role + ":" + std::to_string(rank), pid);
    }
    return out;
  }
  // Waits until the launcher has started `count` processes.
  void AwaitProcesses(size_t count) const {
    const Deadline started = Deadline::After(seconds(30));
    while (Processes().size() < count && !started.expired())
      std::this_thread::sleep_for(milliseconds(20));
  }
  static bool Alive(pid_t pid) { return kill(pid, 0) == 0; }
};

TEST_F(LauncherTest, RunsAJobAndExitsZero) {
  Result<Subprocess> p = Launch({"--servers", "2", "--workers", "3", "--epochs", "2"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->Wait(Deadline::After(seconds(60))), std::optional<int>(0));
  const std::string out = Output();
  EXPECT_NE(out.find("[launch] run directory:"), std::string::npos);
  EXPECT_NE(out.find("[worker:2] step 9 done"), std::string::npos);  // prefixed, 2 epochs x 5
  EXPECT_NE(out.find("[ps:1]"), std::string::npos);
  EXPECT_NE(out.find("job finished"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "run" / "worker-1.log"));
  EXPECT_TRUE(fs::exists(dir_ / "run" / "ps-0.log"));
  const auto procs = Processes();
  ASSERT_EQ(procs.size(), 5u);
  for (const auto& [tag, pid] : procs) EXPECT_FALSE(Alive(pid)) << tag << " outlived the job";
}

TEST_F(LauncherTest, KilledWorkerStopsTheJobWithAClearMessageWithoutRestarts) {
  Result<Subprocess> p =
      Launch({"--servers", "1", "--workers", "3", "--epochs", "1000", "--max-restarts", "0"});
  ASSERT_TRUE(p.ok()) << p.status();
  AwaitProcesses(4);
  const auto procs = Processes();
  ASSERT_EQ(procs.size(), 4u);
  std::this_thread::sleep_for(milliseconds(500));  // mid-run
  ASSERT_EQ(procs[2].first, "worker:1");
  kill(procs[2].second, SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const std::optional<int> code = p->Wait(Deadline::After(seconds(30)));
  ASSERT_TRUE(code.has_value()) << "launcher hung after a worker died";
  EXPECT_NE(*code, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - killed, seconds(15));
  const std::string out = Output();
  EXPECT_NE(out.find("worker:1 was killed by SIGKILL"), std::string::npos) << out;
  EXPECT_NE(out.find("last lines of"), std::string::npos);
  for (const auto& [tag, pid] : procs) EXPECT_FALSE(Alive(pid)) << tag << " was left running";
}

TEST_F(LauncherTest, SigtermStopsEveryProcess) {
  Result<Subprocess> p = Launch({"--servers", "1", "--workers", "2", "--epochs", "1000"});
  ASSERT_TRUE(p.ok()) << p.status();
  AwaitProcesses(3);
  std::this_thread::sleep_for(milliseconds(300));
  const auto procs = Processes();
  ASSERT_EQ(procs.size(), 3u);
  kill(p->pid(), SIGTERM);
  const std::optional<int> code = p->Wait(Deadline::After(seconds(20)));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_NE(Output().find("signal 15 received"), std::string::npos);
  for (const auto& [tag, pid] : procs) EXPECT_FALSE(Alive(pid)) << tag << " was left running";
}

// A launcher killed by SIGKILL cannot stop anything itself: every process it started must end on
// its own (PR_SET_PDEATHSIG). Here none of them writes a line after the kill (the workers stall
// before connecting), so none is ended by a broken pipe either, as an idle server was not. This
// test is the orphans' subreaper, as a login machine's init would be (a container's init may
// kill orphans itself, which would hide the leak).
TEST_F(LauncherTest, SigkillOfTheLauncherLeavesNoProcessOfTheJob) {
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  Result<Subprocess> p = Launch({"--servers", "2", "--workers", "2", "--epochs", "1000"},
                                {"FAKE_WORKER_STALL_MS=60000"});
  ASSERT_TRUE(p.ok()) << p.status();
  AwaitProcesses(4);
  std::this_thread::sleep_for(milliseconds(300));
  const auto procs = Processes();
  ASSERT_EQ(procs.size(), 4u);
  ASSERT_EQ(kill(p->pid(), SIGKILL), 0);
  EXPECT_EQ(p->Wait(Deadline::After(seconds(10))), 128 + SIGKILL);
  const Deadline two_seconds = Deadline::After(seconds(2));
  for (const auto& [tag, pid] : procs) {
    while (ProcessRunning(pid) && !two_seconds.expired()) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    EXPECT_FALSE(ProcessRunning(pid)) << tag << " outlived its SIGKILLed launcher by 2 s";
    kill(pid, SIGKILL);        // leave nothing behind for other tests,
    waitpid(pid, nullptr, 0);  // and reap what was reparented to this test
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_F(LauncherTest, BadOptionsAreRejectedBeforeAnythingStarts) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--workers", "0"}, "--workers"},
      {{"--mode", "eventual"}, "--mode=eventual"},
      {{"--lr", "-1"}, "--lr"},
      {{"--replicas-to-aggregate", "5", "--workers", "2"}, "--replicas-to-aggregate=5"},
      {{"--base-port", "70000"}, "--base-port=70000"},
      {{"--intra-op-threads", "0"}, "--intra-op-threads=0"},
      {{"--bucket-cap-mb", "-1"}, "--bucket-cap-mb=-1"},
      {{"--no-such-flag"}, "no-such-flag"},
      {{"--workers", "many"}, "workers"},
      {{"--server-bin", "/nonexistent/towerps-server"}, "/nonexistent/towerps-server"},
      {{"--straggler", "9:40ms"}, "--straggler rank 9"},
      {{"--straggler-dist", "gauss:1ms"}, "--straggler-dist=gauss:1ms"},
      {{"--worker-allocator", "jemalloc", "--worker-cmd", "python3 t.py"},
       "--worker-allocator 'jemalloc' is not auto, tcmalloc or system"},
      {{"--worker-allocator", "system"}, "--worker-allocator system is for --worker-cmd workers"},
      // Where the chief writes at the end is checked before the training, not after it.
      {{"--export-npz", "/nonexistent/dir/m.npz"}, "the directory /nonexistent/dir does not exist"},
      {{"--summary-out", "/nonexistent/s.json"},
       "--summary-out /nonexistent/s.json: the directory"},
      {{"--worker-cmd", " "}, "--worker-cmd is empty"},
      // An unquoted --worker-cmd: its script was dropped, and python3 read an empty stdin.
      {{"--worker-cmd", "/usr/bin/python3", "train.py"}, "unexpected argument 'train.py'"},
  };
  for (const auto& [args, expect] : cases) {
    Result<Subprocess> p = Launch(args);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->Wait(Deadline::After(seconds(20))), std::optional<int>(2)) << args[0];
    EXPECT_NE(Output().find(expect), std::string::npos) << Output();
    EXPECT_FALSE(fs::exists(dir_ / "run")) << "a process directory was created for " << args[0];
  }
}

// A server's --port out of range is refused naming it (ZeroMQ took 99999 as 34463).
TEST_F(LauncherTest, AServerRefusesAPortOutOfRange) {
  for (const char* port : {"99999", "-1"}) {
    Result<int> code = RunProcess({BinDir() + "/towerps-server", "--port", port, "--insecure"},
                                  dir_ / "server.txt", {}, seconds(20));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 2) << dir_.Read("server.txt");
    EXPECT_NE(dir_.Read("server.txt").find("--port=" + std::string(port) + " is not a TCP port"),
              std::string::npos)
        << dir_.Read("server.txt");
  }
}

TEST_F(LauncherTest, BadTowersAreRejectedBeforeAnyProcessStarts) {
  // The worker's own --towers grammar (worker::ParseTowerList), checked by the launcher: no
  // server is started only to see worker:0 exit with code 2.
  Result<Subprocess> p = Launch({"--towers", "cpu:x"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Wait(Deadline::After(seconds(20))), std::optional<int>(2));
  const std::string out = Output();
  EXPECT_NE(out.find("--towers"), std::string::npos) << out;
  EXPECT_NE(out.find("'cpu:x'"), std::string::npos) << out;
  EXPECT_EQ(out.find("[ps:0]"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "the launcher created its run directory";
}

TEST_F(LauncherTest, AModelThatDoesNotFitTheDataIsRejectedBeforeAnyProcessStarts) {
  // cifar10's 3x24x24 crops against Fashion-MNIST's 1x28x28 images (the default dataset): once
  // this trained on misread memory and printed loss = -nan.
  Result<Subprocess> p = Launch({"--model", "cifar10", "--max-steps", "5"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Wait(Deadline::After(seconds(20))), std::optional<int>(2));
  const std::string out = Output();
  EXPECT_NE(out.find("model cifar10 expects 3x24x24 inputs, but fashion-mnist examples are "
                     "1x28x28 (choose --model mlp or cnn, or another --dataset)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("[ps:0]"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "the launcher created its run directory";
  // An unknown model is named with the known ones.
  Result<Subprocess> q = Launch({"--model", "nope"});
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->Wait(Deadline::After(seconds(20))), std::optional<int>(2));
  EXPECT_NE(Output().find("unknown model 'nope' (known: mlp, cnn, cifar10, resnet20, embed-mlp, "
                          "bag-mlp, ctr_mlp, dlrm_small, wide_deep, regression_mlp)"),
            std::string::npos)
      << Output();
}

TEST_F(LauncherTest, AFailedWorkerIsReportedWithItsOwnErrorNotAsAnInternalError) {
  Result<Subprocess> p = Launch({"--servers", "1", "--workers", "3", "--epochs", "1000"},
                                {"FAKE_WORKER_FAIL=2:error"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->Wait(Deadline::After(seconds(30))), std::optional<int>(1));
  // Its last error line, not its last line ("cleaning up ...").
  EXPECT_EQ(LastLine(),
            "towerps-launch: worker:2 exited with code 1: fake failure: the disk is on fire");
  EXPECT_EQ(Output().find("internal error"), std::string::npos) << Output();
  EXPECT_NE(Output().find("last lines of"), std::string::npos);  // still shown
}

// A worker that refuses its input exits 2; so does the launcher, as for any bad value it finds
// itself (it used to say 1).
TEST_F(LauncherTest, AWorkerRefusingItsInputEndsTheJobWithExitStatus2) {
  Result<Subprocess> p = Launch({"--servers", "1", "--workers", "2", "--epochs", "1000"},
                                {"FAKE_WORKER_FAIL=1:usage"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->Wait(Deadline::After(seconds(30))), std::optional<int>(2)) << Output();
  EXPECT_EQ(LastLine(),
            "towerps-launch: worker:1 exited with code 2: fake bad input: x and y "
            "have different lengths");
}

TEST_F(LauncherTest, AWorkerKilledBySignalIsReportedAsSuch) {
  Result<Subprocess> p =
      Launch({"--servers", "1", "--workers", "2", "--epochs", "1000", "--max-restarts", "0"},
             {"FAKE_WORKER_FAIL=1:sigkill"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->Wait(Deadline::After(seconds(30))), std::optional<int>(1));
  EXPECT_EQ(LastLine(), "towerps-launch: worker:1 was killed by SIGKILL");
}

// A worker that dies every time (this fake kills itself at start) is restarted --max-restarts
// times, each restart said, and then the job ends naming it.
TEST_F(LauncherTest, AWorkerThatKeepsDyingSpendsItsRestartsAndEndsTheJob) {
  Result<Subprocess> p = Launch({"--servers", "1", "--workers", "2", "--epochs", "1000"},
                                {"FAKE_WORKER_FAIL=1:sigkill"});
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->Wait(Deadline::After(seconds(30))), std::optional<int>(1));
  const std::string out = Output();
  for (int n = 1; n <= 3; ++n) {
    EXPECT_NE(
        out.find("worker:1 was killed by SIGKILL; restarting it (" + std::to_string(n) + " of 3)"),
        std::string::npos)
        << out;
  }
  EXPECT_EQ(LastLine(),
            "towerps-launch: worker:1 was killed by SIGKILL again, after 3 restart(s) "
            "(--max-restarts=3 is spent)");
}

// What only this machine can tell (local mode): refused with exit 2, naming the option, before
// the run directory exists or any process starts.
TEST_F(LauncherTest, DataDevicesAndPortsAreCheckedBeforeAnyProcessStarts) {
  // A listening port whose predecessor is free (so that only server 1's port is busy): other
  // tests running alongside take ports too, so look for such a pair.
  int busy = -1, port = 0;
  for (int attempt = 0; attempt < 50 && busy < 0; ++attempt) {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(s, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(s, 1), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    const int p = ntohs(addr.sin_port);
    const int probe = socket(AF_INET, SOCK_STREAM, 0);
    addr.sin_port = htons(static_cast<uint16_t>(p - 1));
    const bool before_free =
        p > 1024 && bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    close(probe);
    if (before_free) {
      busy = s;
      port = p;
    } else {
      close(s);
    }
  }
  ASSERT_GE(busy, 0) << "no free port next to a busy one";
  const std::string base = std::to_string(port - 1);  // server 1 would take the busy port
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--model", "nope"}, "--model nope: unknown model 'nope'"},
      {{"--dataset", "nope"}, "--dataset nope: unknown dataset 'nope'"},
      {{"--data-dir", "/nonexistent"},
       "cannot read their data here: data directory '/nonexistent' does not exist"},
      {{"--dataset", "cifar10", "--model", "cifar10", "--data-dir", dir_.path().string()},
       "--data-dir " + dir_.path().string() +
           ": the workers run on this machine and cannot read "
           "their data here: "},
      {{"--towers", "cpu:0,gpu:999"}, "--towers gpu:999 does not exist"},
      {{"--servers", "2", "--base-port", base},
       "--base-port=" + base + ": port " + std::to_string(port) + " (server 1) is already in use"},
      {{"--bind", "192.0.2.1"}, "--bind 192.0.2.1: cannot listen there"},
  };
  for (const auto& [args, expect] : cases) {
    Result<Subprocess> p = Launch(args);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->Wait(Deadline::After(seconds(20))), std::optional<int>(2)) << args[1];
    EXPECT_EQ(LastLine().rfind("towerps-launch: --", 0), 0u) << args[1] << ": names no option";
    EXPECT_NE(LastLine().find(expect), std::string::npos) << args[1] << "\n" << Output();
    EXPECT_EQ(Output().find("[ps:"), std::string::npos) << "a server was started for " << args[1];
    EXPECT_FALSE(fs::exists(dir_ / "run")) << "a run directory was created for " << args[1];
  }
  close(busy);
  // Soft placement applies as the worker applies it: the missing GPU falls back, the job runs.
  Result<Subprocess> soft = Launch({"--towers", "gpu:999", "--allow-soft-placement"});
  ASSERT_TRUE(soft.ok()) << soft.status();
  EXPECT_EQ(soft->Wait(Deadline::After(seconds(60))), std::optional<int>(0)) << Output();
}

TEST_F(LauncherTest, ValidateOnlyChecksTheOptionsAndStartsNothing) {
  Result<Subprocess> good = Launch({"--validate-only", "--workers", "4", "--straggler", "3:40ms"});
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->Wait(Deadline::After(seconds(20))), std::optional<int>(0));
  EXPECT_NE(Output().find("the options are valid"), std::string::npos) << Output();
  Result<Subprocess> bad = Launch({"--validate-only", "--workers", "4", "--straggler", "4:40ms"});
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_EQ(bad->Wait(Deadline::After(seconds(20))), std::optional<int>(2));
  EXPECT_NE(Output().find("--straggler rank 4"), std::string::npos) << Output();
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "the launcher created its run directory";
}

// The fault-tolerance flags are checked before anything starts, naming the flag and the value.
// --validate-only runs every check a real launch runs before it starts anything: here the data,
// which the worker binary cannot read on this machine (it said "valid", and the launch then
// exited 2).
TEST_F(LauncherTest, ValidateOnlyRunsTheChecksOfARealLaunch) {
  const std::vector<std::string> args = {"--dataset", "npy", "--data-dir", "/nonexistent"};
  std::vector<std::string> validate = args;
  validate.insert(validate.begin(), "--validate-only");
  Result<Subprocess> checked = Launch(validate);
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_EQ(checked->Wait(Deadline::After(seconds(20))), std::optional<int>(2)) << Output();
  const std::string said = Output();
  EXPECT_EQ(said.find("the options are valid"), std::string::npos) << said;
  EXPECT_NE(said.find("--data-dir"), std::string::npos) << said;
  EXPECT_FALSE(fs::exists(dir_ / "run")) << "the launcher created its run directory";
  Result<Subprocess> launched = Launch(args);
  ASSERT_TRUE(launched.ok()) << launched.status();
  EXPECT_EQ(launched->Wait(Deadline::After(seconds(20))), std::optional<int>(2)) << Output();
  EXPECT_NE(Output().find("--data-dir"), std::string::npos) << Output();
}

// A --run-dir under a regular file is bad input: exit status 2 (it was 1), from --validate-only
// too, naming the file that is not a directory.
TEST_F(LauncherTest, ARunDirectoryUnderAFileIsRefusedAsBadInput) {
  std::ofstream(dir_ / "plain") << "a file";
  const std::string run_dir = (dir_ / "plain" / "run").string();
  for (bool validate : {true, false}) {
    std::vector<std::string> argv = {kLaunchBin, "--max-steps", "1", "--run-dir", run_dir};
    if (validate) argv.push_back("--validate-only");
    Result<int> code = RunProcess(argv, dir_ / "out.txt", {}, seconds(30));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 2) << dir_.Read("out.txt");
    EXPECT_NE(dir_.Read("out.txt").find("--run-dir " + run_dir + ": " + (dir_ / "plain").string() +
                                        " is not a directory"),
              std::string::npos)
        << dir_.Read("out.txt");
  }
}

// The same --run-dir twice: the second run starts (it used to fail on the first run's secret),
// and the first run's logs are kept beside it.
TEST_F(LauncherTest, ARunDirectoryCanBeUsedAgainAndKeepsTheEarlierLogs) {
  for (int run = 0; run < 2; ++run) {
    Result<Subprocess> p = Launch({"--servers", "1", "--workers", "1", "--epochs", "1"});
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->Wait(Deadline::After(seconds(60))), std::optional<int>(0)) << Output();
  }
  EXPECT_NE(Output().find("the earlier run's files in this run directory are in"),
            std::string::npos)
      << Output();
  for (const char* file : {"ps-0.log", "worker-0.log", "processes.txt", "secret"}) {
    EXPECT_TRUE(fs::exists(dir_ / "run" / file)) << file;
    EXPECT_TRUE(fs::exists(dir_ / "run" / "previous-1" / file)) << file << " of the first run";
  }
}

// A --worker-bin that is not there is named as the user's path, not as a missing default (the
// message said "pass --worker-bin" to a user who had).
TEST_F(LauncherTest, AMissingWorkerBinaryIsNamedAsTheGivenPath) {
  Result<Subprocess> p =
      Start({kLaunchBin, "--validate-only", "--worker-bin", "/nonexistent/w"}, "launch.out");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Wait(Deadline::After(seconds(20))), std::optional<int>(2)) << Output();
  EXPECT_EQ(
      LastLine(),
      "towerps-launch: --worker-bin /nonexistent/w is not an executable file; check the path");
}

// --list-choices with --worker-bin lists that binary's models (it listed the stock worker's).
TEST_F(LauncherTest, ListChoicesAsksTheWorkerBinaryGiven) {
  Result<int> stock =
      RunProcess({kLaunchBin, "--list-choices"}, dir_ / "stock.json", {}, seconds(20));
  ASSERT_TRUE(stock.ok() && *stock == 0) << dir_.Read("stock.json");
  EXPECT_EQ(dir_.Read("stock.json").find("\"tiny\""), std::string::npos);
  Result<int> custom = RunProcess({kLaunchBin, "--list-choices", "--worker-bin", CUSTOM_WORKER_BIN},
                                  dir_ / "custom.json", {}, seconds(20));
  ASSERT_TRUE(custom.ok() && *custom == 0) << dir_.Read("custom.json");
  const std::string json = dir_.Read("custom.json");
  EXPECT_NE(json.find("\"tiny\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"resnet20\""), std::string::npos) << json;  // its stock models too
  EXPECT_NE(json.find("\"softsync\""), std::string::npos) << json;
  Result<int> missing = RunProcess({kLaunchBin, "--list-choices", "--worker-bin", "/nonexistent/w"},
                                   dir_ / "missing.txt", {}, seconds(20));
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(*missing, 2);
  EXPECT_NE(dir_.Read("missing.txt").find("--worker-bin /nonexistent/w is not an executable"),
            std::string::npos);
}

// A worker binary's own flag (Registry::AddOption): its --help and the launcher's --help with
// --worker-bin show it, the launcher passes it to the workers, and the model reads it (tiny's
// hidden layer of 8 units: 784 x 8 + 8 + 8 x 10 + 10 = 6370 parameters; 12746 at the default
// 16). Without --worker-bin it is no flag of the launcher's.
TEST_F(LauncherTest, AWorkerBinarysOwnFlagsArePassedToItsWorkers) {
  Result<int> help =
      RunProcess({CUSTOM_WORKER_BIN, "--help"}, dir_ / "worker_help.txt", {}, seconds(20));
  ASSERT_TRUE(help.ok() && *help == 0) << dir_.Read("worker_help.txt");
  EXPECT_NE(dir_.Read("worker_help.txt").find("--tiny-width"), std::string::npos);
  help = RunProcess({kLaunchBin, "--worker-bin", CUSTOM_WORKER_BIN, "--help"},
                    dir_ / "launch_help.txt", {}, seconds(20));
  ASSERT_TRUE(help.ok() && *help == 0) << dir_.Read("launch_help.txt");
  EXPECT_NE(dir_.Read("launch_help.txt").find("--tiny-width"), std::string::npos);
  Result<int> job = RunProcess({kLaunchBin, "--worker-bin", CUSTOM_WORKER_BIN, "--model", "tiny",
                                "--dataset", "synthetic", "--workers", "1", "--max-steps", "2",
                                "--tiny-width", "8", "--run-dir", (dir_ / "run").string()},
                               dir_ / "job.txt", {}, seconds(120));
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(*job, 0) << dir_.Read("job.txt");
  EXPECT_NE(dir_.Read("job.txt").find("tiny (6370 parameters"), std::string::npos)
      << dir_.Read("job.txt");
  Result<int> stock = RunProcess({kLaunchBin, "--tiny-width", "8", "--validate-only"},
                                 dir_ / "stock.txt", {}, seconds(20));
  ASSERT_TRUE(stock.ok());
  EXPECT_EQ(*stock, 2);
  EXPECT_NE(dir_.Read("stock.txt").find("unrecognised option '--tiny-width'"), std::string::npos)
      << dir_.Read("stock.txt");
}

TEST_F(LauncherTest, BadRestartFlagsAreRefusedNamingThem) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-restarts", "-1"}, "--max-restarts=-1 must be 0"},
      {{"--restart-timeout", "0"}, "--restart-timeout=0 s must be positive"},
      {{"--restart-timeout", "90"},
       "--restart-timeout=90 s must be positive and shorter than "
       "--rpc-timeout-ms=60000"},
      {{"--ready-file", "/tmp/x"}, "--ready-file /tmp/x: that is towerps-worker's own flag"},
  };
  for (const auto& [args, expect] : cases) {
    std::vector<std::string> argv = {"--validate-only"};
    argv.insert(argv.end(), args.begin(), args.end());
    Result<Subprocess> p = Launch(argv);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->Wait(Deadline::After(seconds(20))), std::optional<int>(2)) << args[0];
    EXPECT_NE(LastLine().find(expect), std::string::npos) << args[0] << "\n" << Output();
  }
}

TEST_F(LauncherTest, ListChoicesPrintsJson) {
  Result<int> code =
      RunProcess({kLaunchBin, "--list-choices"}, dir_ / "launch.out", {}, seconds(20));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  const std::string out = Output();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.front(), '{') << out;
  for (const std::string key : {"\"modes\"", "\"models\"", "\"datasets\"", "\"ssp\""}) {
    EXPECT_NE(out.find(key), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace towerps::launch_test
