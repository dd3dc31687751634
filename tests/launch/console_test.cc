// The console of a local job (the real towerps-launch, towerps-server and towerps-worker on
// Fashion-MNIST): on a terminal (a pty from script(1)) the launcher draws one progress bar for
// the job below the log lines; into a file, every line is plain, with no '\r' at all. Either way
// the chief's progress lines never show, in the output or in its log. The launcher's
// --log-level quiets every process.
#include "tests/launch/launch_fixture.h"

namespace towerps::launch_test {
namespace {

class ConsoleTest : public LaunchTest {
 protected:
  void SetUp() override {
    if (!HaveFashionMnist()) GTEST_SKIP() << kNoFashionMnist;
  }
  std::vector<std::string> Job(const std::string& run) const {
    return {kLaunchBin,     "--max-steps", "300",       "--log-every",        "100",
            "--batch-size", "32",          "--run-dir", (dir_ / run).string()};
  }
};

TEST_F(ConsoleTest, OnATerminalOneBarForTheJobAndPlainLinesOtherwise) {
  if (!fs::exists("/usr/bin/script")) GTEST_SKIP() << "script(1) is missing (bsdutils)";
  std::string command;
  for (const std::string& a : Job("tty")) command += "'" + a + "' ";
  ShowOnFailure("tty.out");
  Result<int> tty = RunProcess({"/usr/bin/script", "-qec", command, (dir_ / "tty.out").string()},
                               dir_ / "script.out", {}, seconds(120));
  ASSERT_TRUE(tty.ok()) << tty.status();
  EXPECT_EQ(*tty, 0);
  const std::string out = dir_.Read("tty.out");
  EXPECT_NE(out.find("\r\033[Kepoch 1/1 ["), std::string::npos);
  EXPECT_NE(out.find("] 300/300 "), std::string::npos);
  EXPECT_NE(out.find("\r\033[K[worker:0] step 100, loss = "), std::string::npos);
  EXPECT_NE(out.find("[launch] job finished"), std::string::npos);
  EXPECT_EQ(out.find("@progress"), std::string::npos);
  EXPECT_EQ(dir_.Read("tty/worker-0.log").find("@progress"), std::string::npos);
  // The bar ends on the final evaluation's accuracy (this job has no epoch's before it).
  const size_t final_line = out.find("test accuracy = ");
  ASSERT_NE(final_line, std::string::npos);
  const std::string accuracy = out.substr(final_line + 16, 6);
  EXPECT_NE(out.find(" acc " + accuracy), std::string::npos) << accuracy;

  ShowOnFailure("plain.out");
  Result<int> plain = RunProcess(Job("plain"), dir_ / "plain.out", {}, seconds(120));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, 0);
  const std::string lines = dir_.Read("plain.out");
  EXPECT_EQ(lines.find('\r'), std::string::npos);
  EXPECT_EQ(lines.find("@progress"), std::string::npos);
  EXPECT_NE(lines.find("[worker:1] step 200, loss = "), std::string::npos);
  EXPECT_NE(lines.find("[ps:0] I "), std::string::npos);

  // The launcher's --log-level reaches every process: no info lines, the step lines stay.
  ShowOnFailure("quiet.out");
  std::vector<std::string> quiet = Job("quiet");
  quiet.insert(quiet.end(), {"--log-level", "warning"});
  Result<int> code = RunProcess(quiet, dir_ / "quiet.out", {}, seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  const std::string few = dir_.Read("quiet.out");
  EXPECT_EQ(few.find("[ps:0] I "), std::string::npos);
  EXPECT_EQ(few.find("[worker:0] I "), std::string::npos);
  EXPECT_NE(few.find("[worker:0] step 300, loss = "), std::string::npos);
}

}  // namespace
}  // namespace towerps::launch_test
