#include "python/session_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace towerps::python {
namespace {

const std::vector<std::string> kBase = {
    "--rank",         "1",
    "--workers",      "2",
    "--ps-endpoints", "tcp://127.0.0.1:5000,tcp://127.0.0.1:5001",
    "--insecure"};

std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> args = kBase;
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(SessionOptionsTest, ParsesWhatTheLauncherGivesAWorker) {
  Result<SessionOptions> o =
      ParseSessionArgs(With({"--mode", "ssp", "--staleness", "3", "--lr", "0.2"}), "");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->rank, 1);
  EXPECT_EQ(o->job.workers, 2);
  EXPECT_EQ(o->job.mode, ps::UpdateMode::kSsp);
  EXPECT_EQ(o->job.staleness, 3);
  EXPECT_FLOAT_EQ(o->job.optimizer.learning_rate, 0.2f);
  EXPECT_EQ(o->ps_endpoints,
            (std::vector<std::string>{"tcp://127.0.0.1:5000", "tcp://127.0.0.1:5001"}));
}

TEST(SessionOptionsTest, ABadOptionIsNamed) {
  Result<SessionOptions> o = ParseSessionArgs(With({"--mode", "bogus"}), "");
  ASSERT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("--mode"), std::string::npos) << o.status().message();
  EXPECT_NE(o.status().message().find("bogus"), std::string::npos) << o.status().message();
  o = ParseSessionArgs(With({"--no-such-flag"}), "");
  ASSERT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("no-such-flag"), std::string::npos);
}

TEST(SessionOptionsTest, RankAndServersAreRequiredAndChecked) {
  Result<SessionOptions> o = ParseSessionArgs({"--insecure"}, "");
  ASSERT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("--ps-endpoints"), std::string::npos);
  o = ParseSessionArgs(With({"--rank", "2"}), "");
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
}

TEST(SessionOptionsTest, WithoutASecretOrInsecureItSaysHowToGetOne) {
  Result<SessionOptions> o =
      ParseSessionArgs({"--rank", "0", "--ps-endpoints", "tcp://127.0.0.1:5000"}, "");
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument) << o.status().ToString();
}

// Found by tests/fuzz/worker_args_fuzzer: an unknown option holding "%original_token%" made
// Boost's error text substitute it for ever.
TEST(SessionOptionsTest, AnOptionWithABoostPlaceholderIsRefusedNotLoopedOn) {
  Result<SessionOptions> o = ParseSessionArgs(
      {"--rank", "0", "--ps-endpoint", "softsy,c", "--sz:zprefnite%original_token%", "continue"},
      "");
  ASSERT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("sz:zprefnite"), std::string::npos) << o.status().message();
}

TEST(SessionOptionsTest, WorkerArgsComeAsAJsonArray) {
  Result<std::vector<std::string>> args = WorkerArgsFromJson(R"(["--rank","3"])");
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, (std::vector<std::string>{"--rank", "3"}));
  EXPECT_NE(WorkerArgsFromJson("").status().message().find("towerps-launch --worker-cmd"),
            std::string::npos);
  EXPECT_EQ(WorkerArgsFromJson("{\"a\":1}").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkerArgsFromJson("[1]").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(WorkerArgsFromJson("[\"unterminated").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace towerps::python
