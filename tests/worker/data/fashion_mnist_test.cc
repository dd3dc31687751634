// Fashion-MNIST loading from IDX files this test writes (gzip and plain), including every way the
// pair can be broken; and, when the dataset-fashion-mnist package is installed, the real files.
#include "worker/data/fashion_mnist.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>
#include "tests/worker/data/idx_test_files.h"

#include <filesystem>
#include <fstream>

namespace towerps::worker {
namespace {

namespace fs = std::filesystem;
using testing::IdxBytes;

class FashionMnistTest : public ::testing::Test {
 protected:
  void WriteGz(const std::string& name, const std::string& bytes) {
    gzFile f = gzopen((dir_ / name).c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
  }
  void WritePlain(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  // A valid split with n examples of 4x3 pixels; pixel j of example i is i * 12 + j.
  void WriteSplit(const std::string& prefix, uint32_t n, bool gzip = true) {
    std::vector<uint8_t> pixels(n * 12), labels(n);
    for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i);
    for (uint32_t i = 0; i < n; ++i) labels[i] = static_cast<uint8_t>(i % 10);
    auto write = [&](const std::string& name, const std::string& bytes) {
      gzip ? WriteGz(name + ".gz", bytes) : WritePlain(name, bytes);
    };
    write(prefix + "-images-idx3-ubyte", IdxBytes({n, 4, 3}, pixels));
    write(prefix + "-labels-idx1-ubyte", IdxBytes({n}, labels));
  }
  FashionMnistOptions Options(Split split = Split::kTrain) {
    return {.data_dir = dir_.string(), .split = split};
  }

  testing::TestDir scratch_{"fmnist_test"};
  const fs::path& dir_ = scratch_.path();
};

TEST_F(FashionMnistTest, LoadsGzipTrainAndPlainTest) {
  WriteSplit("train", 7);
  WriteSplit("t10k", 3, /*gzip=*/false);
  auto train = LoadFashionMnist(Options());
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  EXPECT_EQ(train->size(), 7);
  EXPECT_EQ(train->example_shape, (Shape{1, 4, 3}));
  EXPECT_EQ(train->pixels[12 * 5 + 2], 5 * 12 + 2);
  EXPECT_EQ(train->labels[6], 6);
  auto test = LoadFashionMnist(Options(Split::kTest));
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_EQ(test->size(), 3);
}

TEST_F(FashionMnistTest, MissingFilesNameTheDirectory) {
  auto r = LoadFashionMnist(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(dir_.string()), std::string::npos);
  EXPECT_NE(r.status().message().find("train-images-idx3-ubyte"), std::string::npos);
}

TEST_F(FashionMnistTest, CountMismatchNamesBothFiles) {
  WriteGz("train-images-idx3-ubyte.gz", IdxBytes({3, 4, 3}, std::vector<uint8_t>(36, 1)));
  WriteGz("train-labels-idx1-ubyte.gz", IdxBytes({2}, {1, 2}));
  auto r = LoadFashionMnist(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("3 images"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("2 labels"), std::string::npos);
  EXPECT_NE(r.status().message().find("train-labels-idx1-ubyte.gz"), std::string::npos);
}

TEST_F(FashionMnistTest, BadMagicTruncationRankAndLabelRange) {
  WriteSplit("train", 4);
  // Wrong magic in the labels file.
  WriteGz("train-labels-idx1-ubyte.gz", std::string("\x01\x02\x08\x01\x00\x00\x00\x04"
                                                    "abcd",
                                                    12));
  auto r = LoadFashionMnist(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("bad magic"), std::string::npos) << r.status().message();
  // Truncated images.
  WriteSplit("train", 4);
  std::string images = IdxBytes({4, 4, 3}, std::vector<uint8_t>(48, 7));
  WriteGz("train-images-idx3-ubyte.gz", images.substr(0, images.size() - 5));
  r = LoadFashionMnist(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  // Images of the wrong rank.
  WriteGz("train-images-idx3-ubyte.gz", IdxBytes({4, 12}, std::vector<uint8_t>(48, 7)));
  r = LoadFashionMnist(Options());
  EXPECT_NE(r.status().message().find("3 dimensions"), std::string::npos) << r.status().message();
  // A label out of range.
  WriteSplit("train", 4);
  WriteGz("train-labels-idx1-ubyte.gz", IdxBytes({4}, {1, 2, 10, 3}));
  r = LoadFashionMnist(Options());
  ASSERT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("label 10 of example 2"), std::string::npos)
      << r.status().message();
}

TEST(FashionMnistPackageTest, RealDatasetWhenInstalled) {
  if (!fs::exists(std::string(kDefaultFashionMnistDir) + "/t10k-labels-idx1-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  auto test = LoadFashionMnist({.split = Split::kTest});
  ASSERT_TRUE(test.ok()) << test.status().ToString();
  EXPECT_EQ(test->size(), 10000);
  EXPECT_EQ(test->example_shape, (Shape{1, 28, 28}));
  std::vector<int> per_class(10);
  for (uint8_t l : test->labels) ++per_class[l];
  for (int c : per_class) EXPECT_EQ(c, 1000);
}

}  // namespace
}  // namespace towerps::worker
