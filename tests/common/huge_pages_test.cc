// AllocateArray and HugePageAllocator (common/huge_pages.h): large arrays start on a 2 MiB
// boundary (outside sanitizer builds) and hold what is written to every byte of them; small ones
// and `huge` false come from operator new; a vector keeps its elements as it grows past 2 MiB.
// Whether the kernel backs them with huge pages is its setting's business, so it is reported,
// not asserted.
#include "common/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace towerps {
namespace {

bool OnHugePageBoundary(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kHugePageBytes == 0;
}

TEST(HugePagesTest, LargeArraysStartOnAHugePageAndHoldEveryByte) {
  for (const size_t bytes : {kHugePageBytes, 3 * kHugePageBytes + 100, 5 * kHugePageBytes}) {
    auto* p = static_cast<unsigned char*>(AllocateArray(bytes));
    ASSERT_NE(p, nullptr);
    if (kHugePageArrays) {
      EXPECT_TRUE(OnHugePageBoundary(p)) << bytes;
    }
    for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i * 7);
    for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(p[i], static_cast<unsigned char>(i * 7));
    EXPECT_EQ(p[bytes - 1], static_cast<unsigned char>((bytes - 1) * 7));
    ReleaseArray(p, bytes);
  }
  void* small = AllocateArray(1000);
  std::memset(small, 1, 1000);
  ReleaseArray(small, 1000);
  void* plain = AllocateArray(3 * kHugePageBytes, /*huge=*/false);
  std::memset(plain, 1, 3 * kHugePageBytes);
  ReleaseArray(plain, 3 * kHugePageBytes, /*huge=*/false);
}

TEST(HugePagesTest, AVectorKeepsItsElementsAsItGrowsOntoHugePages) {
  std::vector<uint64_t, HugePageAllocator<uint64_t>> v;
  const size_t n = 3 * kHugePageBytes / sizeof(uint64_t);
  for (size_t i = 0; i < n; ++i) v.push_back(i * 0x9e3779b97f4a7c15ULL);
  if (kHugePageArrays) {
    EXPECT_TRUE(OnHugePageBoundary(v.data()));
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(v[i], i * 0x9e3779b97f4a7c15ULL) << i;
  v.resize(10);
  v.shrink_to_fit();
  EXPECT_EQ(v[9], 9 * 0x9e3779b97f4a7c15ULL);
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  std::getline(setting, line);
  std::cout << "transparent huge pages here: " << (line.empty() ? "unknown" : line) << "\n";
}

}  // namespace
}  // namespace towerps
