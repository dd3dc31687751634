// Test support: IDX file bytes, and a temporary directory per test.
#ifndef TOWERPS_TESTS_WORKER_DATA_IDX_TEST_FILES_H_
#define TOWERPS_TESTS_WORKER_DATA_IDX_TEST_FILES_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace towerps::worker::testing {

// An unsigned-byte IDX file: magic, big-endian dimensions, then `data`.
inline std::string IdxBytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      s.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  s.append(data.begin(), data.end());
  return s;
}

// A directory named after the running test, created empty and removed at destruction.
class TestDir {
 public:
  explicit TestDir(const std::string& prefix)
      : path_(std::filesystem::temp_directory_path() /
              (prefix + "_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TestDir() { std::filesystem::remove_all(path_); }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace towerps::worker::testing

#endif  // TOWERPS_TESTS_WORKER_DATA_IDX_TEST_FILES_H_
