// JobSecret: the file a job's processes prove membership with, and the keys derived from it.
#include "common/job_secret.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace towerps {
namespace {

class JobSecretTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("towerps_secret_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(JobSecretTest, CreatedFileIsPrivateAndLoadsToTheSameKeys) {
  Result<JobSecret> made = JobSecret::Create(Path("s"));
  ASSERT_TRUE(made.ok()) << made.status();
  struct stat st {};
  ASSERT_EQ(stat(Path("s").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  Result<JobSecret> loaded = JobSecret::Load(Path("s"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->PlainPassword(), made->PlainPassword());
  EXPECT_EQ(loaded->CurveServerKeys().public_key, made->CurveServerKeys().public_key);
  EXPECT_EQ(loaded->CurveClientKeys().secret_key, made->CurveClientKeys().secret_key);
  EXPECT_TRUE(loaded->PlainPasswordMatches(made->PlainPassword()));
  EXPECT_FALSE(loaded->PlainPasswordMatches(made->PlainPassword().substr(1) + "0"));
  EXPECT_FALSE(loaded->PlainPasswordMatches(""));
  // The derived values neither reveal the secret nor coincide with each other.
  std::ifstream in(Path("s"));
  std::string text;
  in >> text;
  EXPECT_EQ(text.size(), 64u);
  EXPECT_NE(loaded->PlainPassword(), text);
  EXPECT_NE(loaded->CurveServerKeys().public_key, loaded->CurveClientKeys().public_key);
}

TEST_F(JobSecretTest, TwoSecretsDeriveDifferentCredentials) {
  Result<JobSecret> a = JobSecret::Generate(), b = JobSecret::Generate();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->PlainPassword(), b->PlainPassword());
  EXPECT_FALSE(a->PlainPasswordMatches(b->PlainPassword()));
  EXPECT_NE(a->CurveServerKeys().public_key, b->CurveServerKeys().public_key);
}

TEST_F(JobSecretTest, CreateNeverOverwrites) {
  ASSERT_TRUE(JobSecret::Create(Path("s")).ok());
  Result<JobSecret> again = JobSecret::Create(Path("s"));
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("exists already"), std::string::npos) << again.status();
}

TEST_F(JobSecretTest, RefusesFilesOthersCanReadAndMalformedOnes) {
  ASSERT_TRUE(JobSecret::Create(Path("s")).ok());
  ASSERT_EQ(chmod(Path("s").c_str(), 0644), 0);
  Result<JobSecret> open = JobSecret::Load(Path("s"));
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("chmod 600"), std::string::npos) << open.status();

  for (const std::string& text : {std::string(""), std::string(63, 'a'), std::string(64, 'g'),
                                  std::string(65, 'a'), std::string(64, 'a') + "\n\n"}) {
    std::filesystem::remove(Path("bad"));
    { std::ofstream(Path("bad")) << text; }
    ASSERT_EQ(chmod(Path("bad").c_str(), 0600), 0);
    Result<JobSecret> bad = JobSecret::Load(Path("bad"));
    ASSERT_FALSE(bad.ok()) << "accepted '" << text << "'";
    EXPECT_NE(bad.status().message().find("64 hex characters"), std::string::npos) << bad.status();
  }
  EXPECT_EQ(JobSecret::Load(Path("absent")).status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace towerps
