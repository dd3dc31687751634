// Process-per-rank launching with real processes: a cluster spec file and TOWERPS_CONFIG, one
// process at a time, and a real mpirun.
#include <gtest/gtest.h>
#include <unistd.h>

#include <sstream>

#include "common/job_secret.h"
#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

class RankModesTest : public LaunchTest {
 protected:
  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << kNoFashionMnist;
  }
  static int FreePort() { return UnusedPort(); }
};

TEST_F(RankModesTest, ClusterSpecFileAndEnvironment) {
  const int port = FreePort();
  const std::string spec = R"({"cluster": {"ps": ["127.0.0.1:)" + std::to_string(port) +
                           R"("], "worker": ["127.0.0.1:1", "127.0.0.1:2"]}})";
  std::ofstream(dir_ / "cluster.json") << spec;
  const std::string file = (dir_ / "cluster.json").string();
  // One secret for every process, made as a user would.
  const std::string secret = (dir_ / "secret").string();
  Result<int> made =
      RunProcess({kLaunchBin, "--new-secret", secret}, dir_ / "secret.out", {}, seconds(20));
  ASSERT_TRUE(made.ok() && *made == 0) << dir_.Read("secret.out");
  const std::vector<std::string> job = {"--max-steps", "20", "--bind", "127.0.0.1"};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.end(), job.begin(), job.end());
    return a;
  };
  Result<Subprocess> ps = Start(with({kLaunchBin, "--cluster", file, "--role", "ps", "--index", "0",
                                      "--secret-file", secret}),
                                "ps.out");
  ASSERT_TRUE(ps.ok()) << ps.status();
  Result<Subprocess> w1 = Start(with({kLaunchBin, "--cluster", file, "--role", "worker", "--index",
                                      "1", "--secret-file", secret}),
                                "w1.out");
  ASSERT_TRUE(w1.ok()) << w1.status();
  // The chief takes its task from TOWERPS_CONFIG, as TensorFlow's TF_CONFIG.
  const std::string env_spec =
      spec.substr(0, spec.size() - 1) + R"(, "task": {"type": "worker", "index": 0}})";
  Result<Subprocess> w0 = Start(with({kLaunchBin}), "w0.out",
                                {"TOWERPS_CONFIG=" + env_spec, "TOWERPS_SECRET_FILE=" + secret});
  ASSERT_TRUE(w0.ok()) << w0.status();
  EXPECT_EQ(w0->Wait(Deadline::After(seconds(60))), std::optional<int>(0)) << dir_.Read("w0.out");
  EXPECT_EQ(w1->Wait(Deadline::After(seconds(60))), std::optional<int>(0)) << dir_.Read("w1.out");
  // The chief stops the servers at the end: nothing is left running.
  EXPECT_EQ(ps->Wait(Deadline::After(seconds(30))), std::optional<int>(0)) << dir_.Read("ps.out");
  EXPECT_NE(dir_.Read("w0.out").find("test accuracy ="), std::string::npos) << dir_.Read("w0.out");
}

// A server of a --cluster job whose workers never come (they died before they registered, as
// under srun without --kill-on-bad-exit) does not outlive the job: once it has heard from no
// worker for --orphan-timeout-ms it stops, failing, and names them.
TEST_F(RankModesTest, AServerWhoseWorkersNeverComeStopsAndNamesThem) {
  std::ofstream(dir_ / "cluster.json") << R"({"cluster": {"ps": ["127.0.0.1:)" +
                                              std::to_string(FreePort()) +
                                              R"("], "worker": ["127.0.0.1:1", "127.0.0.1:2"]}})";
  Result<Subprocess> ps =
      Start({kLaunchBin, "--cluster", (dir_ / "cluster.json").string(), "--role", "ps", "--index",
             "0", "--insecure", "--bind", "127.0.0.1", "--orphan-timeout-ms", "1500"},
            "ps.out");
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ(ps->Wait(Deadline::After(seconds(30))), std::optional<int>(1)) << dir_.Read("ps.out");
  const std::string out = dir_.Read("ps.out");
  EXPECT_NE(out.find("no worker or launcher has contacted this server for 1 s (worker:0, "
                     "worker:1 never contacted it)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("--orphan-timeout-ms"), std::string::npos) << out;
}

// A process of a --cluster job without the job's secret is refused before it starts, with exit
// status 2 and one line that says how to make one; the launcher's name is not repeated in it.
TEST_F(RankModesTest, ClusterProcessWithoutASecretSaysHowToMakeOne) {
  std::ofstream(dir_ / "cluster.json")
      << R"({"cluster": {"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}})";
  Result<int> code = RunProcess({kLaunchBin, "--cluster", (dir_ / "cluster.json").string(),
                                 "--role", "worker", "--index", "0", "--max-steps", "1"},
                                dir_ / "out.txt", {}, seconds(20));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2) << dir_.Read("out.txt");
  const std::string out = dir_.Read("out.txt");
  EXPECT_EQ(out.rfind("towerps-launch: every process of a --mpi, --slurm or --cluster job", 0), 0u)
      << out;
  EXPECT_EQ(out.find("towerps-launch:", 1), std::string::npos) << "a repeated prefix: " << out;
  EXPECT_NE(out.find("--new-secret FILE"), std::string::npos) << out;
}

// A TensorFlow user's TF_CONFIG, alone in each process's environment (1 ps, a chief and a
// worker), runs the job --cluster runs, to the same final parameters.
TEST_F(RankModesTest, TfConfigAloneRunsTheClusterJob) {
  const std::string secret = (dir_ / "secret").string();
  ASSERT_TRUE(JobSecret::Create(secret).ok());
  const std::vector<std::string> job = {"--max-steps",   "20",  "--bind", "127.0.0.1",
                                        "--secret-file", secret};
  // Runs the three processes, each with its own argv tail and environment; true when all exit 0.
  auto run = [&](const std::string& name, const std::vector<std::vector<std::string>>& args,
                 const std::vector<std::vector<std::string>>& envs) {
    std::vector<Subprocess> procs;
    for (size_t i = 0; i < args.size(); ++i) {
      std::vector<std::string> argv = {kLaunchBin};
      argv.insert(argv.end(), args[i].begin(), args[i].end());
      argv.insert(argv.end(), job.begin(), job.end());
      argv.insert(argv.end(), {"--final-params-out", (dir_ / (name + ".bin")).string()});
      const std::string out = name + "-" + std::to_string(i) + ".out";
      ShowOnFailure(out);
      Result<Subprocess> p = Start(argv, out, envs[i]);
      if (!p.ok()) return false;
      procs.push_back(std::move(*p));
    }
    bool ok = true;
    for (Subprocess& p : procs) ok &= p.Wait(Deadline::After(seconds(90))) == std::optional<int>(0);
    return ok;
  };
  const int port = FreePort();
  const std::string ps = R"("ps": ["127.0.0.1:)" + std::to_string(port) + R"("])";
  std::ofstream(dir_ / "cluster.json")
      << "{" << ps << R"(, "worker": ["127.0.0.1:1", "127.0.0.1:2"]})";
  const std::string file = (dir_ / "cluster.json").string();
  ASSERT_TRUE(run("cluster",
                  {{"--cluster", file, "--role", "ps", "--index", "0"},
                   {"--cluster", file, "--role", "worker", "--index", "0"},
                   {"--cluster", file, "--role", "worker", "--index", "1"}},
                  {{}, {}, {}}));

  const int tf_port = FreePort();
  const std::string cluster = R"({"cluster": {"ps": ["127.0.0.1:)" + std::to_string(tf_port) +
                              R"("], "chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]}, )";
  auto tf_config = [&](const std::string& type) {
    return "TF_CONFIG=" + cluster + R"("task": {"type": ")" + type + R"(", "index": 0}})";
  };
  ASSERT_TRUE(
      run("tf", {{}, {}, {}}, {{tf_config("ps")}, {tf_config("chief")}, {tf_config("worker")}}));
  // Each process became its task (a local job would also train and write the same bits).
  EXPECT_NE(dir_.Read("tf-0.out").find("serving on tcp://127.0.0.1:" + std::to_string(tf_port)),
            std::string::npos);
  EXPECT_NE(dir_.Read("tf-1.out").find("test accuracy ="), std::string::npos);
  EXPECT_EQ(dir_.Read("tf-2.out").find("test accuracy ="), std::string::npos);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(dir_.Read("tf-" + std::to_string(i) + ".out").find("run directory"),
              std::string::npos);
  }
  const std::string expected = dir_.Read("cluster.bin");
  EXPECT_GT(expected.size(), 100000u);
  EXPECT_EQ(dir_.Read("tf.bin"), expected);
}

TEST_F(RankModesTest, MpirunStartsServersAndWorkersFromRanks) {
  if (!fs::exists("/usr/bin/mpirun"))
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
  ShowOnFailure("mpi.out");
  // Without a secret, every rank refuses before starting anything, and says how to make one.
  Result<int> refused = RunProcess({"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe",
                                    "-np", "2", kLaunchBin, "--mpi", "--servers", "1"},
                                   dir_ / "nosecret.out", {}, seconds(60));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_NE(*refused, 0);
  EXPECT_NE(dir_.Read("nosecret.out").find("--new-secret"), std::string::npos)
      << dir_.Read("nosecret.out");
  const std::string secret = (dir_ / "secret").string();
  ASSERT_TRUE(JobSecret::Create(secret).ok());
  Result<int> code =
      RunProcess({"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3",
                  kLaunchBin, "--mpi", "--servers", "1", "--max-steps", "40", "--log-every", "10",
                  "--base-port", std::to_string(FreePort()), "--secret-file", secret},
                 dir_ / "mpi.out", {}, seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  const std::string out = dir_.Read("mpi.out");
  EXPECT_NE(out.find("test accuracy ="), std::string::npos);
  EXPECT_NE(out.find("workers\":2"), std::string::npos);
  // mpirun gives every rank one shared terminal: no progress bar is drawn there ('\r'), and
  // every line, step lines and the summary included, says which process it came from.
  EXPECT_EQ(out.find('\r'), std::string::npos);
  EXPECT_NE(out.find("[worker:1] step 30, loss = "), std::string::npos);
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    const bool prefixed = line.rfind("[worker:", 0) == 0 || line.rfind("[ps:", 0) == 0;
    EXPECT_TRUE(prefixed || line.empty()) << "no role prefix: " << line;
  }
}

}  // namespace
}  // namespace towerps::launch_test
