// The CIFAR-10 reader on batch files this test writes, including truncated, empty, missing and
// out-of-range files.
#include "worker/data/cifar10_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace towerps::worker {
namespace {

namespace fs = std::filesystem;

class Cifar10ReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("cifar_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // `records` records; record r has label (r + first) % 10 and pixel j = (r * 7 + j) % 256.
  std::string Records(int records, int first = 0) {
    std::string s;
    for (int r = 0; r < records; ++r) {
      s.push_back(static_cast<char>((r + first) % 10));
      for (int j = 0; j < 3072; ++j) s.push_back(static_cast<char>((r * 7 + j) % 256));
    }
    return s;
  }
  std::string Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return (dir_ / name).string();
  }

  fs::path dir_;
};

TEST_F(Cifar10ReaderTest, ReadsAndConcatenatesTrainingBatches) {
  for (int i = 1; i <= 5; ++i) Write("data_batch_" + std::to_string(i) + ".bin", Records(2, i));
  Write("test_batch.bin", Records(3));
  auto train = LoadCifar10(dir_.string(), Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ(train->size(), 10);
  EXPECT_EQ(train->example_shape, (Shape{3, 32, 32}));
  EXPECT_EQ(train->labels[0], 1);  // batch 1, record 0
  EXPECT_EQ(train->labels[9], 6);  // batch 5, record 1
  // Record 1 of a batch: pixel j is (7 + j) % 256, channel-major.
  EXPECT_EQ(train->pixels[3072 + 1024 + 5], (7 + 1024 + 5) % 256);
  auto test = LoadCifar10(dir_.string(), Split::kTest);
  ASSERT_TRUE(test.ok());
  EXPECT_EQ(test->size(), 3);
}

TEST_F(Cifar10ReaderTest, TruncatedFileIsCorruptionNamingTheFile) {
  const std::string bytes = Records(2);
  const std::string path = Write("test_batch.bin", bytes.substr(0, bytes.size() - 100));
  auto r = ReadCifar10Batches({path});
  ASSERT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
}

TEST_F(Cifar10ReaderTest, EmptyMissingAndBadLabel) {
  auto r = ReadCifar10Batches({Write("empty.bin", "")});
  ASSERT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("empty"), std::string::npos);

  r = LoadCifar10(dir_.string(), Split::kTest);
  ASSERT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("test_batch.bin"), std::string::npos);

  std::string bytes = Records(3);
  bytes[2 * kCifar10RecordBytes] = 57;  // label of record 2
  r = ReadCifar10Batches({Write("bad.bin", bytes)});
  ASSERT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("record 2 has label 57"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace towerps::worker
