// Process-per-rank launching with real processes: a cluster spec file and TOWERPS_CONFIG, one
// process at a time, and a real mpirun.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/subprocess.h"

namespace towerps {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class RankModesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
      GTEST_SKIP() << "Fashion-MNIST is not installed";
    }
    dir_ = fs::temp_directory_path() / ("rank_modes_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Out(const std::string& name) const {
    std::ifstream in(dir_ / name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  Subprocess Start(std::vector<std::string> argv, const std::string& out,
                   std::vector<std::string> env = {}) {
    SubprocessOptions o;
    o.argv = std::move(argv);
    o.output_path = (dir_ / out).string();
    o.extra_env = std::move(env);
    auto p = Subprocess::Start(o);
    EXPECT_TRUE(p.ok());
    return std::move(p).value();
  }
  // A port unlikely to be in use, different for each call and each test process.
  static int FreePort() {
    static int next = 20000 + getpid() % 20000;
    return next++;
  }
  fs::path dir_;
};

TEST_F(RankModesTest, ClusterSpecFileAndEnvironment) {
  const int port = FreePort();
  const std::string spec = R"({"cluster": {"ps": ["127.0.0.1:)" + std::to_string(port) +
                           R"("], "worker": ["127.0.0.1:1", "127.0.0.1:2"]}})";
  std::ofstream((dir_ / "cluster.json").string()) << spec;
  const std::string file = (dir_ / "cluster.json").string();
  const std::vector<std::string> job = {"--max-steps", "20", "--bind", "127.0.0.1"};
  auto with = [&](std::vector<std::string> a) {
    a.insert(a.end(), job.begin(), job.end());
    return a;
  };
  Subprocess ps = Start(
      with({TOWERPS_LAUNCH_BIN, "--cluster", file, "--role", "ps", "--index", "0"}), "ps.out");
  Subprocess w1 = Start(
      with({TOWERPS_LAUNCH_BIN, "--cluster", file, "--role", "worker", "--index", "1"}), "w1.out");
  // The chief takes its task from TOWERPS_CONFIG, as TensorFlow's TF_CONFIG.
  const std::string env_spec =
      spec.substr(0, spec.size() - 1) + R"(, "task": {"type": "worker", "index": 0}})";
  Subprocess w0 = Start(with({TOWERPS_LAUNCH_BIN}), "w0.out", {"TOWERPS_CONFIG=" + env_spec});
  EXPECT_EQ(w0.Wait(Deadline::After(seconds(60))), std::optional<int>(0)) << Out("w0.out");
  EXPECT_EQ(w1.Wait(Deadline::After(seconds(60))), std::optional<int>(0)) << Out("w1.out");
  // The chief stops the servers at the end: nothing is left running.
  EXPECT_EQ(ps.Wait(Deadline::After(seconds(30))), std::optional<int>(0)) << Out("ps.out");
  EXPECT_NE(Out("w0.out").find("test accuracy ="), std::string::npos) << Out("w0.out");
}

TEST_F(RankModesTest, MpirunStartsServersAndWorkersFromRanks) {
  if (!fs::exists("/usr/bin/mpirun"))
    GTEST_SKIP() << "mpirun not installed (apt-get install openmpi-bin)";
  Subprocess p = Start(
      {"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", TOWERPS_LAUNCH_BIN,
       "--mpi", "--servers", "1", "--max-steps", "20", "--base-port", std::to_string(FreePort())},
      "mpi.out");
  EXPECT_EQ(p.Wait(Deadline::After(seconds(120))), std::optional<int>(0)) << Out("mpi.out");
  EXPECT_NE(Out("mpi.out").find("test accuracy ="), std::string::npos) << Out("mpi.out");
  EXPECT_NE(Out("mpi.out").find("workers\":2"), std::string::npos) << Out("mpi.out");
}

}  // namespace
}  // namespace towerps
