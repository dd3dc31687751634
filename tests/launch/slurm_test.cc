// towerps-launch --slurm against a real single-node Slurm: munged, slurmctld and slurmd from
// Debian's munge and slurm-wlm, started here with their own configuration in a temporary
// directory, then `srun` and `sbatch` with launch/examples/train.sbatch.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "common/subprocess.h"

namespace towerps {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

std::string Read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SlurmTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      skip_ = "needs root to run slurmctld and slurmd (CI runs as root)";
      return;
    }
    for (const char* bin : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged",
                            "/usr/bin/srun", "/usr/bin/sbatch", "/usr/bin/sinfo"}) {
      if (!fs::exists(bin)) {
        skip_ = std::string(bin) + " is missing (apt-get install slurm-wlm munge)";
        return;
      }
    }
    if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      skip_ = "Fashion-MNIST is not installed";
      return;
    }
    dir_ = new fs::path(fs::temp_directory_path() / ("slurm_test_" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_ / "state");
    fs::create_directories(*dir_ / "spool");
    fs::create_directories(*dir_ / "munge");      // the key: private
    fs::create_directories(*dir_ / "munge-run");  // the socket: munged wants it world-searchable
    fs::permissions(*dir_ / "munge", fs::perms::owner_all);
    fs::permissions(*dir_ / "munge-run", fs::perms::owner_all | fs::perms::group_exec |
                                             fs::perms::others_exec | fs::perms::group_read |
                                             fs::perms::others_read);
    {
      std::ofstream key(*dir_ / "munge" / "munge.key", std::ios::binary);
      std::ifstream random("/dev/urandom", std::ios::binary);
      char buf[1024];
      random.read(buf, sizeof(buf));
      key.write(buf, sizeof(buf));
    }
    fs::permissions(*dir_ / "munge" / "munge.key", fs::perms::owner_read);
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    std::string node = host;
    node = node.substr(0, node.find('.'));
    const int port = 17000 + getpid() % 2000 * 2;
    const std::string d = dir_->string();
    std::ofstream(*dir_ / "slurm.conf")
        << "ClusterName=towerps\nSlurmctldHost=" << node << "\nSlurmUser=root\nSlurmdUser=root\n"
        << "AuthType=auth/munge\nAuthInfo=socket=" << d << "/munge-run/munge.socket\n"
        << "CredType=cred/munge\nStateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d
        << "/spool\nSlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d
        << "/slurmd.pid\nSlurmctldPort=" << port << "\nSlurmdPort=" << port + 1
        << "\nSlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d << "/slurmd.log\n"
        << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSchedulerType=sched/builtin\n"
        << "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\nMpiDefault=none\n"
        << "ReturnToService=2\nJobAcctGatherType=jobacct_gather/none\n"
        << "AccountingStorageType=accounting_storage/none\nNodeName=" << node
        << " CPUs=2 State=UNKNOWN\n"
        << "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP "
           "OverSubscribe=YES\n";
    env_ = new std::vector<std::string>{"SLURM_CONF=" + d + "/slurm.conf"};
    daemons_ = new std::vector<Subprocess>;
    auto start = [&](std::vector<std::string> argv, const std::string& log) {
      SubprocessOptions o;
      o.argv = std::move(argv);
      o.extra_env = *env_;
      o.output_path = d + "/" + log;
      auto p = Subprocess::Start(o);
      if (p.ok()) daemons_->push_back(std::move(p).value());
    };
    start({"/usr/sbin/munged", "-F", "--key-file=" + d + "/munge/munge.key",
           "--socket=" + d + "/munge-run/munge.socket", "--pid-file=" + d + "/munge-run/munged.pid",
           "--log-file=" + d + "/munge/munged.log", "--seed-file=" + d + "/munge/seed"},
          "munged.out");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    start({"/usr/sbin/slurmctld", "-D", "-f", d + "/slurm.conf"}, "slurmctld.out");
    start({"/usr/sbin/slurmd", "-D", "-f", d + "/slurm.conf"}, "slurmd.out");
    // Up when the node reports idle.
    for (Deadline dl = Deadline::After(seconds(30)); !dl.expired();) {
      SubprocessOptions o;
      o.argv = {"/usr/bin/sinfo", "-h", "-o", "%t"};
      o.extra_env = *env_;
      o.output_path = d + "/sinfo.out";
      auto p = Subprocess::Start(o);
      if (p.ok() && p->Wait(Deadline::After(seconds(10))) == std::optional<int>(0) &&
          Read(*dir_ / "sinfo.out").find("idle") != std::string::npos) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    failed_ =
        "Slurm did not come up: " + Read(*dir_ / "slurmctld.log") + Read(*dir_ / "slurmd.log");
  }

  static void TearDownTestSuite() {
    if (daemons_) {
      for (auto it = daemons_->rbegin(); it != daemons_->rend(); ++it) it->Signal(SIGTERM);
      for (auto& p : *daemons_) p.Wait(Deadline::After(seconds(10)));
      delete daemons_;  // SIGKILLs whatever is left
      daemons_ = nullptr;
    }
    if (dir_) fs::remove_all(*dir_);
    delete dir_;
    delete env_;
    dir_ = nullptr;
    env_ = nullptr;
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(failed_.empty()) << failed_;
  }

  int Run(std::vector<std::string> argv, const std::string& out, int timeout_s = 180) {
    SubprocessOptions o;
    o.argv = std::move(argv);
    o.extra_env = *env_;
    o.extra_env.push_back(std::string("TOWERPS_BIN=") + TOWERPS_BIN_DIR);
    o.output_path = (*dir_ / out).string();
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok());
    return p->Wait(Deadline::After(seconds(timeout_s))).value_or(-1);
  }

  static inline std::string skip_, failed_;
  static inline fs::path* dir_ = nullptr;
  static inline std::vector<std::string>* env_ = nullptr;
  static inline std::vector<Subprocess>* daemons_ = nullptr;
};

TEST_F(SlurmTest, SrunRunsAJob) {
  const int code = Run(
      {"/usr/bin/srun", "--overcommit", "-n", "3", std::string(TOWERPS_BIN_DIR) + "/towerps-launch",
       "--slurm", "--servers", "1", "--max-steps", "20", "--base-port", "7931"},
      "srun.out");
  const std::string out = Read(*dir_ / "srun.out");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("test accuracy ="), std::string::npos) << out;
  EXPECT_NE(out.find("\"workers\":2,\"servers\":1"), std::string::npos) << out;
}

TEST_F(SlurmTest, SbatchRunsTheExampleScript) {
  const std::string job_out = (*dir_ / "sbatch-job.out").string();
  const int code = Run({"/usr/bin/sbatch", "--wait", "--overcommit", "-n", "3", "-o", job_out,
                        TOWERPS_SBATCH_SCRIPT, "--max-steps", "20", "--base-port", "7941"},
                       "sbatch.out");
  const std::string out = Read(job_out);
  EXPECT_EQ(code, 0) << Read(*dir_ / "sbatch.out") << out;
  EXPECT_NE(out.find("test accuracy ="), std::string::npos) << out;
}

}  // namespace
}  // namespace towerps
