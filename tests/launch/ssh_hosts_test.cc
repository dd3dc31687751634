// towerps-launch --hostfile against real ssh: three hosts simulated as Linux network namespaces
// (veth pairs on a bridge in a fourth, "login" namespace where the launcher runs; addresses in
// 10.213.0.0/24 exist only inside these namespaces), each running Debian's sshd with host and
// user keys generated here. The binaries and data are reached through the shared file system,
// as on a cluster with a shared home.
//
// Checks: a sync job with servers and workers on different hosts ends with exactly the local
// job's parameters and accuracy; a remote process killed mid-job stops the job with an error
// naming it and its host; a launcher killed mid-job takes every remote process with it. After
// each, no process but sshd remains in any namespace.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <sstream>

#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

constexpr int kHosts = 3;

class SshHostsTest : public ::testing::Test {
 protected:
  // Runs a shell command; its output goes to dir/sh.log. Returns the exit code, -1 when it did
  // not start or end within a minute.
  static int Sh(const std::string& command) {
    const Result<int> code =
        RunProcess({"/bin/sh", "-c", command}, dir() / "sh.log", {}, seconds(60));
    return code.ok() ? *code : -1;
  }
  static std::string ShOutput() { return ReadFile(dir() / "sh.log"); }
  static const fs::path& dir() { return dir_->path(); }
  static std::string Ns(int host) {  // host 0 is the login node
    return "tps" + std::to_string(getpid()) + (host == 0 ? "login" : "h" + std::to_string(host));
  }
  static std::string Address(int host) { return "10.213.0." + std::to_string(host + 1); }

  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "needs root to create network namespaces and run sshd (CI runs as root)";
      return;
    }
    for (const char* bin :
         {"/usr/sbin/ip", "/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen"}) {
      if (!fs::exists(bin)) {
        skip_ = std::string(bin) + " is missing (apt-get install iproute2 openssh-server)";
        return;
      }
    }
    if (!HaveFashionMnist()) {
      skip_ = kNoFashionMnist;
      return;
    }
    dir_ = new ScratchDir("ssh_hosts_test");
    const std::string d = dir().string();
    std::ostringstream net;
    net << "set -e\nip netns add " << Ns(0) << "\nip -n " << Ns(0) << " link set lo up\n"
        << "ip -n " << Ns(0) << " link add br0 type bridge\n"
        << "ip -n " << Ns(0) << " addr add " << Address(0) << "/24 dev br0\n"
        << "ip -n " << Ns(0) << " link set br0 up\n";
    for (int h = 1; h <= kHosts; ++h) {
      net << "ip netns add " << Ns(h) << "\n"
          << "ip link add name v" << h << " netns " << Ns(0) << " type veth peer name eth0 netns "
          << Ns(h) << "\n"
          << "ip -n " << Ns(0) << " link set v" << h << " master br0 up\n"
          << "ip -n " << Ns(h) << " addr add " << Address(h) << "/24 dev eth0\n"
          << "ip -n " << Ns(h) << " link set eth0 up\nip -n " << Ns(h) << " link set lo up\n";
    }
    namespaces_created_ = true;
    if (Sh(net.str()) != 0) {
      setup_error_ = "creating the namespaces failed: " + ShOutput();
      return;
    }
    if (Sh("ssh-keygen -q -t ed25519 -N '' -f " + d + "/host_key && ssh-keygen -q -t ed25519 " +
           "-N '' -f " + d + "/id && cp " + d + "/id.pub " + d + "/authorized_keys && " +
           "mkdir -p /run/sshd && chmod 755 /run/sshd") != 0) {
      setup_error_ = "ssh-keygen failed: " + ShOutput();
      return;
    }
    std::ofstream(dir() / "sshd_config")
        << "Port 22\nHostKey " << d << "/host_key\nAuthorizedKeysFile " << d
        << "/authorized_keys\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        << "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nLogLevel ERROR\n";
    sshd_ = new std::vector<Subprocess>();
    for (int h = 1; h <= kHosts; ++h) {
      Result<Subprocess> p =
          StartProcess({"/usr/sbin/ip", "netns", "exec", Ns(h), "/usr/sbin/sshd", "-D", "-e", "-f",
                        d + "/sshd_config", "-o", "ListenAddress=" + Address(h), "-o",
                        "PidFile=" + d + "/sshd" + std::to_string(h) + ".pid"},
                       dir() / ("sshd" + std::to_string(h) + ".log"));
      if (!p.ok()) {
        setup_error_ = "cannot start sshd: " + p.status().ToString();
        return;
      }
      sshd_->push_back(std::move(*p));
    }
    // Wait until every sshd answers from the login node.
    for (int h = 1; h <= kHosts; ++h) {
      bool up = false;
      for (int attempt = 0; attempt < 100 && !up; ++attempt) {
        up = Sh("ip netns exec " + Ns(0) + " ssh " + SshOpts() + " " + Address(h) + " true") == 0;
        if (!up) std::this_thread::sleep_for(milliseconds(100));
      }
      if (!up) {
        setup_error_ = "sshd on " + Address(h) + " does not answer: " + ShOutput() +
                       ReadFile(dir() / ("sshd" + std::to_string(h) + ".log"));
        return;
      }
    }
    std::ofstream(dir() / "hosts.txt") << "# three simulated hosts\n"
                                       << Address(1) << " slots=1 servers\n"
                                       << Address(2) << " slots=2 workers\n"
                                       << Address(3) << " slots=2\n";
  }

  static void TearDownTestSuite() {
    delete sshd_;  // kills every sshd
    sshd_ = nullptr;
    if (namespaces_created_) {
      std::string del;
      for (int h = 0; h <= kHosts; ++h) del += "ip netns del " + Ns(h) + " 2>/dev/null; ";
      Sh(del);
    }
    delete dir_;  // removes it unless TOWERPS_KEEP_TEST_DIR is set
    dir_ = nullptr;
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(setup_error_.empty()) << setup_error_;
  }

  static std::string SshOpts() {
    return "-i " + dir().string() +
           "/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR";
  }

  // The job both tests run; the local run uses the same options without the hostfile.
  static std::vector<std::string> JobArgs(const std::string& name,
                                          const std::vector<std::string>& extra) {
    std::vector<std::string> a = {
        "--servers", "2",       "--workers", "3",         "--mode",
        "sync",      "--model", "mlp",       "--run-dir", (dir() / name).string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  // towerps-launch in the login namespace with the hostfile (or, when `hostfile` starts with
  // "-H ", that host list); output to dir/<name>.out.
  // `exports`: more variables for the remote processes (--export).
  static Result<Subprocess> LaunchOnHosts(const std::string& name,
                                          const std::vector<std::string>& extra,
                                          const std::string& hostfile = "hosts.txt",
                                          const std::string& exports = "") {
    const bool list = hostfile.rfind("-H ", 0) == 0;
    std::vector<std::string> argv = {"/usr/sbin/ip",
                                     "netns",
                                     "exec",
                                     Ns(0),
                                     kLaunchBin,
                                     list ? "-H" : "--hostfile",
                                     list ? hostfile.substr(3) : (dir() / hostfile).string(),
                                     "--ssh-opts",
                                     SshOpts()};
    // OpenBLAS picks its kernels from these: the remote processes must use the local ones.
    std::string names = exports;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string kv = *e;
      if (kv.rfind("OPENBLAS_", 0) == 0 || kv.rfind("OMP_", 0) == 0)
        names += (names.empty() ? "" : ",") + kv.substr(0, kv.find('='));
    }
    if (!names.empty()) argv.insert(argv.end(), {"--export", names});
    const std::vector<std::string> job = JobArgs(name, extra);
    argv.insert(argv.end(), job.begin(), job.end());
    return StartProcess(argv, dir() / (name + ".out"));
  }

  // A process's command line, or "" once it has exited. Read with read(2): a process that
  // exits between the open and the read makes the read fail with ESRCH, which std::ifstream
  // turns into an exception.
  static std::string ProcCmdline(const std::string& pid) {
    const int fd = ::open(("/proc/" + pid + "/cmdline").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return "";
    std::string out;
    char buf[4096];
    for (ssize_t got; (got = ::read(fd, buf, sizeof(buf))) > 0;) out.append(buf, got);
    ::close(fd);
    return out;
  }

  // Pids in namespace `host` other than its sshd listener, with their command lines.
  static std::vector<std::string> Leftovers(int host) {
    std::vector<std::string> out;
    if (Sh("ip netns pids " + Ns(host)) != 0) return {"cannot list " + Ns(host)};
    std::istringstream pids(ShOutput());
    const std::string listener =
        host == 0 ? "" : ReadFile(dir() / ("sshd" + std::to_string(host) + ".pid"));
    for (std::string pid; pids >> pid;) {
      if (!listener.empty() && std::stol(listener) == std::stol(pid)) continue;
      std::string cmd = ProcCmdline(pid);
      for (char& c : cmd) c = c == '\0' ? ' ' : c;
      if (cmd.empty()) continue;  // exited meanwhile
      out.push_back(Ns(host) + " pid " + pid + ": " + cmd);
    }
    return out;
  }
  // Waits up to `limit` for every namespace to hold nothing but sshd; returns what is left.
  static std::vector<std::string> AwaitNoOrphans(seconds limit) {
    const Deadline deadline = Deadline::After(limit);
    for (;;) {
      std::vector<std::string> left;
      for (int h = 0; h <= kHosts; ++h) {
        for (std::string& l : Leftovers(h)) left.push_back(std::move(l));
      }
      if (left.empty() || deadline.expired()) return left;
      std::this_thread::sleep_for(milliseconds(200));
    }
  }
  // The pid of the process in namespace `host` whose command line starts with `program`.
  static pid_t FindProcess(int host, const std::string& program, seconds limit) {
    const Deadline deadline = Deadline::After(limit);
    while (!deadline.expired()) {
      for (const std::string& l : Leftovers(host)) {
        const size_t colon = l.find(": ");
        if (l.compare(colon + 2, program.size(), program) == 0) {
          return static_cast<pid_t>(std::stol(l.substr(l.find(" pid ") + 5)));
        }
      }
      std::this_thread::sleep_for(milliseconds(100));
    }
    return 0;
  }
  static std::string Output(const std::string& name) { return ReadFile(dir() / (name + ".out")); }
  static size_t Count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  static bool OutputHas(const std::string& name, const std::string& text) {
    return Output(name).find(text) != std::string::npos;
  }
  static void AwaitOutput(const std::string& name, const std::string& text, seconds limit) {
    AwaitText(dir() / (name + ".out"), text, limit);
  }

  static inline ScratchDir* dir_ = nullptr;
  static inline std::string skip_, setup_error_;
  static inline bool namespaces_created_ = false;
  static inline std::vector<Subprocess>* sshd_ = nullptr;
};

// The hostfile job also survives the SIGKILL of a remote worker mid-run (worker:2, on h3): the
// launcher restarts it over ssh and it recomputes its step, so the bits still match.
TEST_F(SshHostsTest, SyncJobAcrossHostsMatchesTheLocalJob) {
  const std::vector<std::string> steps = {"--max-steps", "300", "--log-every", "10",
                                          "--log-device-placement"};
  auto extra = [&](const std::string& name) {
    std::vector<std::string> e = steps;
    e.insert(e.end(), {"--summary-out", (dir() / (name + ".json")).string(), "--final-params-out",
                       (dir() / (name + ".bin")).string()});
    return e;
  };
  Result<Subprocess> remote = LaunchOnHosts("hosts", extra("hosts"));
  ASSERT_TRUE(remote.ok()) << remote.status();
  const pid_t victim = FindProcess(3, BinDir() + "/towerps-worker", seconds(60));
  ASSERT_GT(victim, 0) << Output("hosts");
  AwaitOutput("hosts", "[worker:2] step 100,", seconds(120));
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  ASSERT_EQ(remote->Wait(Deadline::After(seconds(240))), 0) << Output("hosts");
  EXPECT_TRUE(OutputHas(
      "hosts", "worker:2 on " + Address(3) + " was killed by SIGKILL; restarting it (1 of 3)"))
      << Output("hosts");

  std::vector<std::string> local = {kLaunchBin};
  const std::vector<std::string> job = JobArgs("local", extra("local"));
  local.insert(local.end(), job.begin(), job.end());
  const Result<int> code = RunProcess(local, dir() / "local.out", {}, seconds(240));
  ASSERT_TRUE(code.ok()) << code.status();
  ASSERT_EQ(*code, 0) << Output("local");

  // Where the processes ran: servers on h1 and h3, workers on h2 (two) and h3.
  const std::string table = ReadFile(dir() / "hosts" / "processes.txt");
  for (const std::string& expect :
       {"ps 0 host " + Address(1), "ps 1 host " + Address(3), "worker 0 host " + Address(2),
        "worker 1 host " + Address(2), "worker 2 host " + Address(3)}) {
    EXPECT_NE(table.find(expect), std::string::npos) << expect << " in\n" << table;
  }
  EXPECT_TRUE(OutputHas("hosts", "[worker:2]"));
  EXPECT_TRUE(OutputHas("hosts",
                        "job finished: 3 workers and 2 servers exited cleanly; "
                        "restarted worker:2 1x"));
  // Sync training is deterministic: the same parameters, bit for bit, and the same accuracy.
  const std::string a = ReadFile(dir() / "hosts.bin"), b = ReadFile(dir() / "local.bin");
  ASSERT_FALSE(a.empty());
  EXPECT_TRUE(a == b) << "the hostfile job's final parameters differ from the local job's";
  auto accuracy = [](const std::string& json) {
    const size_t at = json.find("\"test_accuracy\":");
    return at == std::string::npos ? std::string("missing") : json.substr(at, 24);
  };
  const std::string hosts_json = ReadFile(dir() / "hosts.json");
  EXPECT_EQ(accuracy(hosts_json), accuracy(ReadFile(dir() / "local.json")));
  EXPECT_GT(std::atof(accuracy(hosts_json).c_str() + 16), 0.7);
  // Tensors travel through shared memory only between processes on one host (worker:2 and ps:1
  // on h3): the namespaces share a kernel and /dev/shm, and the host identity, which includes
  // the network namespace, tells them apart. In the local job, every connection uses it.
  const std::string out = Output("hosts");
  for (const auto& [worker, server, path] :
       {std::tuple{0, 0, "TCP (the peer is on another host)"},
        std::tuple{0, 1, "TCP (the peer is on another host)"},
        std::tuple{2, 0, "TCP (the peer is on another host)"}, std::tuple{2, 1, "shared memory"}}) {
    const std::string line = "[worker:" + std::to_string(worker) + "] ";
    const std::string says = "ps:" + std::to_string(server) + " (";
    bool found = false;
    for (size_t at = out.find(line); at != std::string::npos; at = out.find(line, at + 1)) {
      const std::string l = out.substr(at, out.find('\n', at) - at);
      if (l.find(says) != std::string::npos) found = found || l.find(path) != std::string::npos;
    }
    EXPECT_TRUE(found) << "worker:" << worker << " to ps:" << server << " should use " << path;
  }
  EXPECT_EQ(Count(Output("local"), ": shared memory"), 6u) << Output("local");
  EXPECT_EQ(AwaitNoOrphans(seconds(15)), std::vector<std::string>{});
}

#ifdef TOWERPS_TINY_WORKER
// PyTorch workers (towerps-launch --worker-cmd) on the hosts, the package reached through the
// exported PYTHONPATH: the sync job ends with every worker holding the same parameters.
TEST_F(SshHostsTest, PyTorchWorkersRunOnTheHosts) {
  setenv("PYTHONPATH", TOWERPS_PYTHONPATH, 1);
  const std::string cmd = std::string("/usr/bin/python3 ") + TOWERPS_TINY_WORKER +
                          " --steps 30 --out " + dir().string();
  Result<Subprocess> job = LaunchOnHosts("pytorch", {"--worker-cmd", cmd, "--batch-size", "32"},
                                         "hosts.txt", "PYTHONPATH");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->Wait(Deadline::After(seconds(240))), 0) << Output("pytorch");
  const std::string params = ReadFile(dir() / "worker-0.json");
  ASSERT_NE(params.find("\"steps\": 30"), std::string::npos) << params;
  for (int w = 1; w < 3; ++w) {
    const std::string other = ReadFile(dir() / ("worker-" + std::to_string(w) + ".json"));
    const auto tail = [](const std::string& j) { return j.substr(j.find("\"params\"")); };
    ASSERT_NE(other.find("\"params\""), std::string::npos) << w;
    EXPECT_EQ(tail(other).substr(0, tail(other).find("\"start_step\"")),
              tail(params).substr(0, tail(params).find("\"start_step\"")))
        << "worker " << w;
  }
  EXPECT_EQ(AwaitNoOrphans(seconds(15)), std::vector<std::string>{});
}
#endif

// horovodrun's -H host:N list places processes as the same hostfile would.
TEST_F(SshHostsTest, HorovodHostListRunsTheJob) {
  Result<Subprocess> job =
      LaunchOnHosts("list", {"--max-steps", "30"},
                    "-H " + Address(1) + ":1," + Address(2) + ":2," + Address(3) + ":2");
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_EQ(job->Wait(Deadline::After(seconds(120))), 0) << Output("list");
  const std::string table = ReadFile(dir() / "list" / "processes.txt");
  for (const std::string& expect :
       {"ps 0 host " + Address(1), "ps 1 host " + Address(2), "worker 0 host " + Address(2),
        "worker 1 host " + Address(3), "worker 2 host " + Address(3)}) {
    EXPECT_NE(table.find(expect), std::string::npos) << expect << " in\n" << table;
  }
  EXPECT_EQ(AwaitNoOrphans(seconds(15)), std::vector<std::string>{});
}

TEST_F(SshHostsTest, KilledRemoteServerStopsTheJobWithoutOrphans) {
  Result<Subprocess> job = LaunchOnHosts("kill", {"--epochs", "100", "--grace-ms", "3000"});
  ASSERT_TRUE(job.ok()) << job.status();
  const pid_t server = FindProcess(1, BinDir() + "/towerps-server", seconds(60));
  ASSERT_GT(server, 0) << Output("kill");
  AwaitOutput("kill", "step ", seconds(60));  // training is under way
  ASSERT_EQ(kill(server, SIGKILL), 0);
  std::optional<int> code = job->Wait(Deadline::After(seconds(60)));
  ASSERT_TRUE(code.has_value()) << "the launcher did not stop\n" << Output("kill");
  EXPECT_NE(*code, 0);
  EXPECT_TRUE(OutputHas("kill", "ps:0 on " + Address(1) + " was killed by SIGKILL"))
      << Output("kill");
  EXPECT_EQ(AwaitNoOrphans(seconds(20)), std::vector<std::string>{});
}

// With --checkpoint-dir (on the server's host) a remote server killed mid-run is restarted over
// ssh on its port, restores its checkpoint, and the job completes.
TEST_F(SshHostsTest, KilledRemoteServerWithCheckpointsIsRestartedAndTheJobCompletes) {
  Result<Subprocess> job =
      LaunchOnHosts("revive", {"--max-steps", "400", "--log-every", "10", "--checkpoint-dir",
                               (dir() / "revive-ckpt").string(), "--checkpoint-every", "50"});
  ASSERT_TRUE(job.ok()) << job.status();
  const pid_t server = FindProcess(1, BinDir() + "/towerps-server", seconds(60));
  ASSERT_GT(server, 0) << Output("revive");
  AwaitOutput("revive", "[worker:0] step 150,", seconds(120));
  ASSERT_EQ(kill(server, SIGKILL), 0);
  ASSERT_EQ(job->Wait(Deadline::After(seconds(240))), 0) << Output("revive");
  EXPECT_TRUE(OutputHas("revive", "ps:0 on " + Address(1) +
                                      " was killed by SIGKILL; restarting it from its last "
                                      "checkpoint (1 of 3)"))
      << Output("revive");
  EXPECT_TRUE(OutputHas("revive", "restarted ps:0 1x")) << Output("revive");
  EXPECT_EQ(AwaitNoOrphans(seconds(20)), std::vector<std::string>{});
}

// With --ps-replicas 2 the two servers (on h1 and h3) each back up the other's chunks: the one on
// h1 killed mid-run fails over to h3, is restarted over ssh with --rejoin, takes its chunks'
// state from h3, and the job completes.
TEST_F(SshHostsTest, KilledRemoteServerWithReplicasFailsOverAndTheJobCompletes) {
  Result<Subprocess> job =
      LaunchOnHosts("replica", {"--max-steps", "400", "--log-every", "10", "--ps-replicas", "2"});
  ASSERT_TRUE(job.ok()) << job.status();
  const pid_t server = FindProcess(1, BinDir() + "/towerps-server", seconds(60));
  ASSERT_GT(server, 0) << Output("replica");
  AwaitOutput("replica", "[worker:0] step 150,", seconds(120));
  ASSERT_EQ(kill(server, SIGKILL), 0) << "ps:0 (pid " << server << ") is gone already; the job:\n"
                                      << Output("replica");
  ASSERT_EQ(job->Wait(Deadline::After(seconds(240))), 0) << Output("replica");
  EXPECT_TRUE(OutputHas("replica", "ps:0 on " + Address(1) +
                                       " was killed by SIGKILL; its chunks fail over to ps:1; "
                                       "restarting it as their backup (1 of 3)"))
      << Output("replica");
  EXPECT_TRUE(OutputHas("replica", "restarted ps:0 1x")) << Output("replica");
  EXPECT_EQ(AwaitNoOrphans(seconds(20)), std::vector<std::string>{});
}

TEST_F(SshHostsTest, KilledLauncherTakesEveryRemoteProcessWithIt) {
  Result<Subprocess> job = LaunchOnHosts("crash", {"--epochs", "100", "--grace-ms", "3000"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_GT(FindProcess(2, BinDir() + "/towerps-worker", seconds(60)), 0) << Output("crash");
  AwaitOutput("crash", "step ", seconds(60));
  // SIGKILL: no chance to clean up. Its ssh clients run in their own process groups and see
  // their stdin close; the watchdogs on the hosts then stop the servers and workers.
  // Their ssh clients die with the launcher too (PR_SET_PDEATHSIG). Within 2 s nothing is left.
  ASSERT_EQ(kill(job->pid(), SIGKILL), 0);
  EXPECT_EQ(job->Wait(Deadline::After(seconds(10))), 128 + SIGKILL) << Output("crash");
  EXPECT_EQ(AwaitNoOrphans(seconds(2)), std::vector<std::string>{}) << Output("crash");
}

TEST_F(SshHostsTest, CtrlCStopsEveryRemoteProcessGracefully) {
  Result<Subprocess> job = LaunchOnHosts("ctrlc", {"--epochs", "100", "--grace-ms", "5000"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_GT(FindProcess(1, BinDir() + "/towerps-server", seconds(60)), 0) << Output("ctrlc");
  AwaitOutput("ctrlc", "step ", seconds(60));
  ASSERT_EQ(kill(job->pid(), SIGINT), 0);  // what Ctrl-C sends
  std::optional<int> code = job->Wait(Deadline::After(seconds(30)));
  ASSERT_TRUE(code.has_value()) << "the launcher did not stop\n" << Output("ctrlc");
  EXPECT_EQ(*code, 128 + SIGINT) << Output("ctrlc");
  EXPECT_TRUE(OutputHas("ctrlc", "signal 2 received; stopping the job"));
  // The servers got SIGTERM on their hosts, not SIGKILL: they said so before exiting.
  EXPECT_TRUE(OutputHas("ctrlc", "[ps:0] ")) << Output("ctrlc");
  EXPECT_TRUE(OutputHas("ctrlc", "stop signal received; stopping")) << Output("ctrlc");
  EXPECT_EQ(AwaitNoOrphans(seconds(20)), std::vector<std::string>{});
}

TEST_F(SshHostsTest, BusyPortAndUnreachableHostAreNamed) {
  // Something else holds server 0's port on its host.
  Result<Subprocess> squatter =
      StartProcess({"/usr/sbin/ip", "netns", "exec", Ns(1), "/usr/bin/python3", "-c",
                    "import socket, time\ns = socket.socket()\n"
                    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                    "s.bind(('0.0.0.0', 7700))\ns.listen()\nprint('bound', flush=True)\n"
                    "time.sleep(120)"},
                   dir() / "squat.out");
  ASSERT_TRUE(squatter.ok()) << squatter.status();
  // SO_REUSEADDR: connections of the earlier tests to that port may linger in TIME_WAIT, which
  // would keep a plain bind out (a listening squatter still keeps the server out).
  ASSERT_TRUE(AwaitText(dir() / "squat.out", "bound", seconds(5))) << ReadFile(dir() / "squat.out");
  Result<Subprocess> busy = LaunchOnHosts("busy", {"--max-steps", "5", "--grace-ms", "3000"});
  ASSERT_TRUE(busy.ok()) << busy.status();
  std::optional<int> code = busy->Wait(Deadline::After(seconds(60)));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  const std::string out = Output("busy");
  EXPECT_NE(out.find("ps:0 on " + Address(1) + " exited with code 1"), std::string::npos) << out;
  EXPECT_NE(out.find(":7700: the port is already in use"), std::string::npos) << out;
  squatter->Signal(SIGKILL);
  squatter->Wait(Deadline::After(seconds(10)));

  // A host nobody answers for: ssh's own message names it and the port.
  std::ofstream(dir() / "unreachable.txt")
      << Address(1) << " slots=1 servers\n10.213.0.99 slots=4\n";
  Result<Subprocess> lost =
      LaunchOnHosts("lost", {"--max-steps", "5", "--grace-ms", "3000"}, "unreachable.txt");
  ASSERT_TRUE(lost.ok()) << lost.status();
  code = lost->Wait(Deadline::After(seconds(90)));
  ASSERT_TRUE(code.has_value());
  EXPECT_NE(*code, 0);
  const std::string lost_out = Output("lost");
  EXPECT_NE(lost_out.find("on 10.213.0.99 exited with code 255"), std::string::npos) << lost_out;
  EXPECT_NE(lost_out.find("connect to host 10.213.0.99 port 22"), std::string::npos) << lost_out;
  EXPECT_EQ(AwaitNoOrphans(seconds(20)), std::vector<std::string>{});
}

}  // namespace
}  // namespace towerps::launch_test
