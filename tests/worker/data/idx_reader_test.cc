// The IDX reader on files this test writes: plain, gzip, and every way they can be broken.
#include "worker/data/idx_reader.h"

#include <gtest/gtest.h>

#include <zlib.h>
#include "tests/worker/data/idx_test_files.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

namespace towerps::worker {
namespace {

namespace fs = std::filesystem;
using testing::IdxBytes;

class IdxReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(11);
    data_.resize(5 * 4 * 3);
    for (auto& b : data_) b = static_cast<uint8_t>(rng());
  }

  std::string WritePlain(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string WriteGzip(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return path;
  }

  testing::TestDir scratch_{"idx_test"};
  const fs::path& dir_ = scratch_.path();
  std::vector<uint8_t> data_;
};

TEST_F(IdxReaderTest, ReadsPlainAndGzip) {
  const std::string bytes = IdxBytes({5, 4, 3}, data_);
  for (const std::string& path : {WritePlain("a.idx", bytes), WriteGzip("a.idx.gz", bytes)}) {
    auto r = ReadIdxFile(path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->dims, (std::vector<int64_t>{5, 4, 3}));
    EXPECT_EQ(r->data, data_);
  }
}

TEST_F(IdxReaderTest, MissingFileIsNotFoundAndNamed) {
  auto r = ReadIdxFile((dir_ / "absent.gz").string());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("absent.gz"), std::string::npos);
}

TEST_F(IdxReaderTest, CorruptFilesAreNamedWithTheProblem) {
  std::string good = IdxBytes({5, 4, 3}, data_);
  std::string bad_magic = good;
  bad_magic[0] = 1;
  std::string bad_type = good;
  bad_type[2] = 0x0D;
  std::string bad_rank = good;
  bad_rank[3] = 0;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bad magic", bad_magic},
      {"not supported", bad_type},
      {"rank 0", bad_rank},
      {"truncated in the IDX dimension list", good.substr(0, 9)},
      {"truncated: the header declares 60 data bytes but the file holds 59",
       good.substr(0, good.size() - 1)},
      {"size mismatch", good + "x"},
  };
  for (const auto& [expect, bytes] : cases) {
    for (bool gz : {false, true}) {
      const std::string path = gz ? WriteGzip("c.gz", bytes) : WritePlain("c.idx", bytes);
      auto r = ReadIdxFile(path);
      ASSERT_FALSE(r.ok()) << expect;
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << expect;
      EXPECT_NE(r.status().message().find(expect), std::string::npos) << r.status().message();
      EXPECT_NE(r.status().message().find(path), std::string::npos);
    }
  }
}

TEST_F(IdxReaderTest, CorruptGzipStreamIsAnError) {
  std::string gz_path = WriteGzip("z.gz", IdxBytes({5, 4, 3}, data_));
  std::string bytes;
  {
    std::ifstream in(gz_path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t i = 12; i < bytes.size() - 8; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0x5a);
  auto r = ReadIdxFile(WritePlain("z2.gz", bytes));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

TEST_F(IdxReaderTest, HugeDeclaredSizeFailsWithoutAllocating) {
  std::string bytes = IdxBytes({0xffffffffu, 0xffffffffu}, {});
  auto r = ReadIdxFile(WritePlain("huge.idx", bytes));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace towerps::worker
