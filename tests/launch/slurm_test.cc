// towerps-launch --slurm against a real single-node Slurm: munged, slurmctld and slurmd from
// Debian's munge and slurm-wlm, started here with their own configuration in a temporary
// directory, then `srun` and `sbatch` with launch/examples/train.sbatch.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <optional>

#include "common/job_secret.h"
#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

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
    if (!HaveFashionMnist()) {
      skip_ = kNoFashionMnist;
      return;
    }
    dir_ = new ScratchDir("slurm_test");
    fs::create_directories(*dir_ / "state");
    fs::create_directories(*dir_ / "spool");
    fs::create_directories(*dir_ / "munge");      // the key: private
    fs::create_directories(*dir_ / "munge-run");  // the socket: munged wants it world-searchable
    fs::permissions(*dir_ / "munge", fs::perms::owner_all);
    fs::permissions(*dir_ / "munge-run", fs::perms::owner_all | fs::perms::group_exec |
                                             fs::perms::others_exec | fs::perms::group_read |
                                             fs::perms::others_read);
    {
      std::ofstream key(*dir_ / "munge/munge.key", std::ios::binary);
      std::ifstream random("/dev/urandom", std::ios::binary);
      char buf[1024];
      random.read(buf, sizeof(buf));
      key.write(buf, sizeof(buf));
    }
    fs::permissions(*dir_ / "munge/munge.key", fs::perms::owner_read);
    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    std::string node = host;
    node = node.substr(0, node.find('.'));
    const int port = 17000 + getpid() % 2000 * 2;
    const std::string d = dir_->path().string();
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
      Result<Subprocess> p = StartProcess(std::move(argv), *dir_ / log, *env_);
      if (p.ok()) {
        daemons_->push_back(std::move(p).value());
      } else if (failed_.empty()) {
        failed_ = "cannot start " + log + ": " + p.status().ToString();
      }
    };
    start({"/usr/sbin/munged", "-F", "--key-file=" + d + "/munge/munge.key",
           "--socket=" + d + "/munge-run/munge.socket", "--pid-file=" + d + "/munge-run/munged.pid",
           "--log-file=" + d + "/munge/munged.log", "--seed-file=" + d + "/munge/seed"},
          "munged.out");
    std::this_thread::sleep_for(milliseconds(300));
    start({"/usr/sbin/slurmctld", "-D", "-f", d + "/slurm.conf"}, "slurmctld.out");
    start({"/usr/sbin/slurmd", "-D", "-f", d + "/slurm.conf"}, "slurmd.out");
    if (!failed_.empty()) return;
    // Up when the node reports idle.
    for (Deadline dl = Deadline::After(seconds(30)); !dl.expired();) {
      const Result<int> code =
          RunProcess({"/usr/bin/sinfo", "-h", "-o", "%t"}, *dir_ / "sinfo.out", *env_, seconds(10));
      if (code.ok() && *code == 0 && dir_->Read("sinfo.out").find("idle") != std::string::npos) {
        return;
      }
      std::this_thread::sleep_for(milliseconds(200));
    }
    failed_ = "Slurm did not come up: " + dir_->Read("slurmctld.log") + dir_->Read("slurmd.log");
  }

  static void TearDownTestSuite() {
    if (daemons_) {
      for (auto it = daemons_->rbegin(); it != daemons_->rend(); ++it) it->Signal(SIGTERM);
      for (auto& p : *daemons_) p.Wait(Deadline::After(seconds(10)));
      delete daemons_;  // SIGKILLs whatever is left
      daemons_ = nullptr;
    }
    delete dir_;  // removes it
    delete env_;
    dir_ = nullptr;
    env_ = nullptr;
  }

  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_TRUE(failed_.empty()) << failed_;
  }

  // Runs a Slurm command to its end, with the Slurm configuration and TOWERPS_BIN set.
  static Result<int> Run(std::vector<std::string> argv, const std::string& out) {
    std::vector<std::string> env = *env_;
    env.push_back("TOWERPS_BIN=" + BinDir());
    return RunProcess(std::move(argv), *dir_ / out, std::move(env), seconds(180));
  }

  static inline std::string skip_, failed_;
  static inline ScratchDir* dir_ = nullptr;
  static inline std::vector<std::string>* env_ = nullptr;
  static inline std::vector<Subprocess>* daemons_ = nullptr;
};

TEST_F(SlurmTest, SrunRunsAJob) {
  // Every task reads the same secret (on a shared file system in a real cluster).
  const std::string secret = (*dir_ / "secret").string();
  ASSERT_TRUE(JobSecret::Create(secret).ok());
  const Result<int> code = Run(
      {"/usr/bin/srun", "--overcommit", "--kill-on-bad-exit=1", "-n", "3", kLaunchBin, "--slurm",
       "--servers", "1", "--max-steps", "20", "--base-port", "7931", "--secret-file", secret},
      "srun.out");
  const std::string out = dir_->Read("srun.out");
  ASSERT_TRUE(code.ok()) << code.status() << "\n" << out;
  EXPECT_EQ(*code, 0) << out;
  EXPECT_NE(out.find("test accuracy ="), std::string::npos) << out;
  EXPECT_NE(out.find("\"workers\":2,\"servers\":1"), std::string::npos) << out;
}

#ifdef TOWERPS_TINY_WORKER
// PyTorch workers under srun (--slurm --worker-cmd): srun passes the environment on, PYTHONPATH
// included.
TEST_F(SlurmTest, SrunRunsPyTorchWorkers) {
  const std::string secret = (*dir_ / "secret").string();
  ASSERT_TRUE(JobSecret::Create(secret).ok());
  setenv("PYTHONPATH", TOWERPS_PYTHONPATH, 1);
  const std::string cmd = std::string("/usr/bin/python3 ") + TOWERPS_TINY_WORKER +
                          " --steps 20 --out " + dir_->path().string();
  const Result<int> code =
      Run({"/usr/bin/srun", "--overcommit", "--kill-on-bad-exit=1", "-n", "3", kLaunchBin,
           "--slurm", "--servers", "1", "--batch-size", "32", "--base-port", "7951",
           "--secret-file", secret, "--worker-cmd", cmd},
          "srun-pytorch.out");
  const std::string out = dir_->Read("srun-pytorch.out");
  ASSERT_TRUE(code.ok()) << code.status() << "\n" << out;
  EXPECT_EQ(*code, 0) << out;
  const std::string chief = dir_->Read("worker-0.json");
  EXPECT_NE(chief.find("\"steps\": 20"), std::string::npos) << chief << out;
  EXPECT_NE(dir_->Read("worker-1.json").find("\"params\""), std::string::npos) << out;
}
#endif

TEST_F(SlurmTest, SbatchRunsTheExampleScript) {
  const std::string job_out = (*dir_ / "sbatch-job.out").string();
  const Result<int> code =
      Run({"/usr/bin/sbatch", "--wait", "--overcommit", "-n", "3", "-o", job_out,
           TOWERPS_SBATCH_SCRIPT, "--max-steps", "20", "--base-port", "7941"},
          "sbatch.out");
  const std::string out = ReadFile(job_out);
  ASSERT_TRUE(code.ok()) << code.status() << "\n" << dir_->Read("sbatch.out") << out;
  EXPECT_EQ(*code, 0) << dir_->Read("sbatch.out") << out;
  EXPECT_NE(out.find("test accuracy ="), std::string::npos) << out;
}

}  // namespace
}  // namespace towerps::launch_test
