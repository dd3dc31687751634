// The hostfile format, where processes go, the ssh command line, and the stdin watchdog that
// stops a remote process when its ssh session ends.
#include "launch/hostfile.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/subprocess.h"
#include "launch/backends/hostfile_launcher.h"

namespace towerps::launch {
namespace {

namespace fs = std::filesystem;

TEST(HostfileTest, ParsesSlotsRolesAndComments) {
  auto hosts = ParseHostfile(
      "# cluster\n\nnode1 slots=4\n  node2 slots=2 servers  # the PS boxes\nnode3 workers\n",
      "h.txt");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].host, "node1");
  EXPECT_EQ((*hosts)[0].slots, 4);
  EXPECT_EQ((*hosts)[0].takes, HostEntry::Takes::kAny);
  EXPECT_EQ((*hosts)[1].slots, 2);
  EXPECT_EQ((*hosts)[1].takes, HostEntry::Takes::kServers);
  EXPECT_EQ((*hosts)[2].slots, 1);  // the default
  EXPECT_EQ((*hosts)[2].takes, HostEntry::Takes::kWorkers);
}

// The habits of Horovod (host:N, -H host1:4,host2:4) and OpenMPI (max_slots=).
TEST(HostfileTest, HorovodAndOpenMpiSlotCounts) {
  auto hosts = ParseHostfile(
      "node1:4\nnode2 max_slots=3\nnode3 slots=2 max_slots=8 workers\nfe80::1 slots=2\n", "h");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 4u);
  EXPECT_EQ((*hosts)[0].host, "node1");
  EXPECT_EQ((*hosts)[0].slots, 4);
  EXPECT_EQ((*hosts)[1].slots, 3);  // max_slots stands in for slots
  EXPECT_EQ((*hosts)[2].slots, 2);
  EXPECT_EQ((*hosts)[2].takes, HostEntry::Takes::kWorkers);
  EXPECT_EQ((*hosts)[3].host, "fe80::1");  // an IPv6 address is a name, not host:N

  auto list = ParseHostList("host1:4,host2:4,host3", "-H");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 3u);
  EXPECT_EQ((*list)[1].host, "host2");
  EXPECT_EQ((*list)[1].slots, 4);
  EXPECT_EQ((*list)[2].slots, 1);
  auto plan = PlaceOnHosts(*list, 1, 8);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->back().host, "host3");

  struct Case {
    std::string text, expect;
    bool list;
  };
  for (const Case& c : std::vector<Case>{
           {"a:0\n", "h:1: 'a:0' is not HOST or HOST:N", false},
           {"a:x\n", "'a:x' is not HOST or HOST:N", false},
           {":4\n", "':4' is not HOST or HOST:N", false},
           {"a:2 slots=2\n", "both give the slot count", false},
           {"a slots=4 max_slots=2\n", "a has 4 slots, more than its max_slots=2", false},
           {"a max_slots=0\n", "'max_slots=0'", false},
           {"a:2,,b", "-H entry 2: '' is not HOST or HOST:N", true},
           {"a:2,a:3", "-H entry 2: host 'a' is already listed as entry 1", true},
           {"a:2, b", "' b' is not HOST or HOST:N", true},
       }) {
    auto r = c.list ? ParseHostList(c.text, "-H") : ParseHostfile(c.text, "h");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().message();
  }
}

TEST(HostfileTest, ErrorsNameTheFileLineAndWord) {
  struct Case {
    std::string text, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"a slots=0\n", "h.txt:1: 'slots=0'"},
           {"a slots=2x\n", "'slots=2x'"},
           {"a slots=1 slots=2\n", "'slots=2'"},
           {"a\nb slots=1 gpus\n", "h.txt:2: unexpected 'gpus'"},
           {"a\nb\na slots=3\n", "h.txt:3: host 'a' is already listed on line 1"},
           {"-oProxyCommand=x slots=1\n", "is not a host name"},
           {"# nothing\n\n", "lists no hosts"},
       }) {
    auto hosts = ParseHostfile(c.text, "h.txt");
    ASSERT_FALSE(hosts.ok()) << c.text;
    EXPECT_NE(hosts.status().message().find(c.expect), std::string::npos)
        << hosts.status().message();
  }
}

TEST(HostfileTest, ServersSpreadFirstThenWorkersFillSlots) {
  auto hosts = ParseHostfile("a slots=1 servers\nb slots=2 workers\nc slots=2\n", "h");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  auto plan = PlaceOnHosts(*hosts, 2, 3);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> got;
  for (const HostPlacement& p : *plan) {
    got.push_back(std::string(p.server ? "ps" : "w") + std::to_string(p.rank) + "@" + p.host + "/" +
                  std::to_string(p.local_rank));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"ps0@a/0", "ps1@c/0", "w0@b/0", "w1@b/1", "w2@c/0"}));

  // Round-robin: with room everywhere, servers go one per host before any host gets two.
  auto even = ParseHostfile("a slots=4\nb slots=4\n", "h");
  ASSERT_TRUE(even.ok()) << even.status();
  auto spread = PlaceOnHosts(*even, 3, 1);
  ASSERT_TRUE(spread.ok()) << spread.status();
  EXPECT_EQ((*spread)[0].host, "a");
  EXPECT_EQ((*spread)[1].host, "b");
  EXPECT_EQ((*spread)[2].host, "a");
  EXPECT_EQ((*spread)[2].local_rank, 1);
  EXPECT_EQ((*spread)[3].host, "a");  // the worker fills a's free slots first
}

TEST(HostfileTest, TooFewSlotsSaysWhatIsMissing) {
  auto hosts = ParseHostfile("a slots=1 servers\nb slots=2 workers\n", "h");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  auto servers = PlaceOnHosts(*hosts, 2, 1);
  ASSERT_FALSE(servers.ok());
  EXPECT_NE(servers.status().message().find("too few for the servers"), std::string::npos)
      << servers.status().message();
  auto workers = PlaceOnHosts(*hosts, 1, 3);
  ASSERT_FALSE(workers.ok());
  EXPECT_NE(workers.status().message().find("--workers=3"), std::string::npos)
      << workers.status().message();
}

// Found by tests/fuzz/hostfile_fuzzer: the slot totals overflowed int (undefined behaviour; a
// negative count in the message).
TEST(HostfileTest, HugeSlotCountsAddUpWithoutOverflow) {
  auto hosts = ParseHostfile("a slots=2147483647 servers\nb slots=2147483647 servers\n", "h");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  auto plan = PlaceOnHosts(*hosts, 2, 1);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("has 4294967294 slots (4294967294 that take servers, 0 "
                                         "that take workers)"),
            std::string::npos)
      << plan.status().message();
  auto mixed = ParseHostfile("a slots=4\nb slots=2147483647\n", "h");
  ASSERT_TRUE(mixed.ok()) << mixed.status();
  auto placed = PlaceOnHosts(*mixed, 2, 5);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(placed->size(), 7u);
}

TEST(SshCommandTest, QuotesForTheRemoteShellAndPutsUserOptionsFirst) {
  EXPECT_EQ(ShellQuote("/opt/towerps/bin/towerps-worker"), "/opt/towerps/bin/towerps-worker");
  EXPECT_EQ(ShellQuote("tcp://10.0.0.1:7700,tcp://b:7701"), "tcp://10.0.0.1:7700,tcp://b:7701");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's $HOME"), "'it'\\''s $HOME'");
  SshOptions ssh;
  ssh.ssh = "/usr/bin/ssh";
  ssh.ssh_opts = {"-i", "key", "-o", "ConnectTimeout=3"};
  auto argv = SshArgv(ssh, "node1", {"/bin/echo", "x y"});
  ASSERT_GE(argv.size(), 6u);
  EXPECT_EQ(argv[0], "/usr/bin/ssh");
  EXPECT_EQ(argv[1], "-i");
  EXPECT_EQ(argv[4], "ConnectTimeout=3");  // before ours: ssh keeps the first value it sees
  EXPECT_EQ(argv[argv.size() - 2], "node1");
  EXPECT_EQ(argv.back(), "exec /bin/echo 'x y'");
  EXPECT_EQ(std::find(argv.begin(), argv.end(), "-n"), argv.end());  // stdin must stay open
}

// The watchdog, run as `towerps-launch --stdin-watchdog`, with stdin a pipe held here.
class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("watchdog_test_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result<Subprocess> Start(std::vector<std::string> command, int grace_ms = 5000) {
    SubprocessOptions o;
    o.argv = {TOWERPS_LAUNCH_BIN, "--stdin-watchdog", "--grace-ms", std::to_string(grace_ms), "--"};
    o.argv.insert(o.argv.end(), command.begin(), command.end());
    o.stdin_pipe = true;
    o.output_path = (dir_ / "out.txt").string();
    return Subprocess::Start(o);
  }
  // Pid written by the shell child, once it is there.
  pid_t ChildPid() {
    for (int i = 0; i < 500; ++i) {
      std::ifstream in(dir_ / "pid");
      pid_t pid = 0;
      if (in >> pid && pid > 0) return pid;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return 0;
  }
  static bool Alive(pid_t pid) { return kill(pid, 0) == 0; }

  fs::path dir_;
};

TEST_F(WatchdogTest, PassesTheExitCodeThrough) {
  auto w = Start({"/bin/sh", "-c", "exit 7"});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->Wait(Deadline::After(std::chrono::seconds(20))), 7);
}

TEST_F(WatchdogTest, ClosingStdinStopsTheCommandWithSigterm) {
  const std::string script = "echo $$ > " + (dir_ / "pid.tmp").string() + "; mv " +
                             (dir_ / "pid.tmp").string() + " " + (dir_ / "pid").string() +
                             "; trap 'exit 42' TERM; while :; do sleep 0.05; done";
  auto w = Start({"/bin/sh", "-c", script});
  ASSERT_TRUE(w.ok()) << w.status();
  const pid_t child = ChildPid();
  ASSERT_GT(child, 0);
  EXPECT_TRUE(Alive(child));
  EXPECT_FALSE(w->Wait(Deadline::After(std::chrono::milliseconds(300))).has_value());
  w->CloseStdin();  // what a closed ssh session looks like on the remote host
  EXPECT_EQ(w->Wait(Deadline::After(std::chrono::seconds(20))), 42);  // the trap ran
  EXPECT_FALSE(Alive(child));
}

TEST_F(WatchdogTest, KillsACommandThatIgnoresSigtermAfterTheGrace) {
  const std::string script = "trap '' TERM; echo $$ > " + (dir_ / "pid.tmp").string() + "; mv " +
                             (dir_ / "pid.tmp").string() + " " + (dir_ / "pid").string() +
                             "; while :; do sleep 0.05; done";
  auto w = Start({"/bin/sh", "-c", script}, /*grace_ms=*/300);
  ASSERT_TRUE(w.ok()) << w.status();
  const pid_t child = ChildPid();
  ASSERT_GT(child, 0);
  w->CloseStdin();
  EXPECT_EQ(w->Wait(Deadline::After(std::chrono::seconds(20))), 128 + SIGKILL);
  EXPECT_FALSE(Alive(child));
}

TEST_F(WatchdogTest, EnvOverridesTheInheritedEnvironment) {
  setenv("TOWERPS_WATCHDOG_TEST", "inherited", 1);
  SubprocessOptions o;
  o.argv = {TOWERPS_LAUNCH_BIN,
            "--stdin-watchdog",
            "--env",
            "TOWERPS_WATCHDOG_TEST=given",
            "--",
            "/bin/sh",
            "-c",
            "test \"$TOWERPS_WATCHDOG_TEST\" = given"};
  o.stdin_pipe = true;
  auto w = Subprocess::Start(o);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->Wait(Deadline::After(std::chrono::seconds(20))), 0);
  unsetenv("TOWERPS_WATCHDOG_TEST");
}

TEST_F(WatchdogTest, RejectsAMissingCommand) {
  SubprocessOptions o;
  o.argv = {TOWERPS_LAUNCH_BIN, "--stdin-watchdog", "--grace-ms", "10"};
  o.output_path = (dir_ / "out.txt").string();
  auto w = Subprocess::Start(o);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->Wait(Deadline::After(std::chrono::seconds(20))), 2);
  std::ifstream in(dir_ / "out.txt");
  const std::string out(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(out.find("give the command after --"), std::string::npos) << out;
}

}  // namespace
}  // namespace towerps::launch
