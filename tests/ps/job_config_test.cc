#include "ps/job_config.h"

#include <gtest/gtest.h>

#include "ps/job_flags.h"

namespace towerps::ps {
namespace {

TEST(JobConfigTest, MismatchNamesTheField) {
  JobConfig a, b;
  b.optimizer.learning_rate = 0.1f;
  Status s = CompareConfigFields(a.Fields(), "server 0", b.Fields(), "worker 2");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("--lr is 0.100000001 at worker 2 but 0.0500000007 at server 0"),
            std::string::npos)
      << s.message();
  EXPECT_NE(a.Fingerprint(), b.Fingerprint());
  EXPECT_TRUE(CompareConfigFields(a.Fields(), "x", a.Fields(), "y").ok());
}

TEST(JobConfigTest, ReplicasDefaultToAllWorkers) {
  JobConfig a, b;
  a.workers = b.workers = 4;
  b.replicas_to_aggregate = 4;
  EXPECT_EQ(a.Fingerprint(), b.Fingerprint());  // 0 means "all", which is 4
}

TEST(JobConfigTest, ValidateNamesTheFlag) {
  JobConfig c;
  c.replicas_to_aggregate = 5;
  EXPECT_NE(c.Validate().message().find("--replicas-to-aggregate=5"), std::string::npos);
  c = JobConfig();
  c.optimizer.learning_rate = -1;
  EXPECT_NE(c.Validate().message().find("--lr"), std::string::npos);
  c = JobConfig();
  c.workers = 0;
  EXPECT_NE(c.Validate().message().find("--workers"), std::string::npos);
  EXPECT_TRUE(JobConfig().Validate().ok());
}

TEST(JobFlagsTest, ParsesAndRejectsBadValues) {
  JobFlags flags;
  boost::program_options::variables_map vm;
  const char* argv[] = {"prog", "--mode", "ssp", "--staleness", "3", "--optimizer", "adam"};
  ASSERT_TRUE(ParseFlags(7, const_cast<char**>(argv), flags.options(), &vm).ok());
  auto c = flags.ToConfig();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->mode, UpdateMode::kSsp);
  EXPECT_EQ(c->staleness, 3);
  EXPECT_EQ(c->optimizer.kind, OptimizerKind::kAdam);

  JobFlags bad;
  boost::program_options::variables_map vm2;
  const char* argv2[] = {"prog", "--mode", "eventual"};
  ASSERT_TRUE(ParseFlags(3, const_cast<char**>(argv2), bad.options(), &vm2).ok());
  EXPECT_NE(bad.ToConfig().status().message().find("--mode=eventual"), std::string::npos);

  JobFlags typo;
  boost::program_options::variables_map vm3;
  const char* argv3[] = {"prog", "--workerz", "3"};
  Status s = ParseFlags(3, const_cast<char**>(argv3), typo.options(), &vm3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("workerz"), std::string::npos);
}

}  // namespace
}  // namespace towerps::ps
