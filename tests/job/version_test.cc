// LowestVersion: the one fold behind "the version of a variable" and the servers' minimum.
#include "job/version.h"

#include <gtest/gtest.h>

namespace towerps::ps {
namespace {

TEST(LowestVersionTest, EmptyIsNoVersion) {
  LowestVersion lowest;
  EXPECT_TRUE(lowest.empty());
  EXPECT_EQ(lowest.value(), kNoVersion);
}

TEST(LowestVersionTest, IsTheMinimumWhateverTheOrder) {
  for (const auto& versions : {std::vector<int64_t>{7, 3, 5}, std::vector<int64_t>{3, 5, 7}}) {
    LowestVersion lowest;
    for (int64_t v : versions) lowest.Add(v);
    EXPECT_FALSE(lowest.empty());
    EXPECT_EQ(lowest.value(), 3);
  }
}

TEST(LowestVersionTest, AChunkWithoutAValueMakesItNoVersion) {
  for (const auto& versions :
       {std::vector<int64_t>{kNoVersion, 4}, std::vector<int64_t>{4, kNoVersion}}) {
    LowestVersion lowest;
    for (int64_t v : versions) lowest.Add(v);
    EXPECT_EQ(lowest.value(), kNoVersion);
  }
}

}  // namespace
}  // namespace towerps::ps
