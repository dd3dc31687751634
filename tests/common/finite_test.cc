// The non-finite check that guards every gradient (worker before a push, server on arrival):
// NaN of either sign, +inf and -inf are found wherever they are, and nothing finite is.
#include "common/finite.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace towerps {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

float FromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

TEST(FiniteTest, FiniteValuesPassIncludingTheExtremes) {
  const std::vector<float> x = {0.0f,    -0.0f,        1.0f,    -1.0f,
                                FLT_MAX, -FLT_MAX,     FLT_MIN, -FLT_MIN,
                                1e-45f,  FLT_TRUE_MIN, 3.0e38f, FromBits(0x7f7fffff)};
  EXPECT_EQ(FindNonFinite(x.data(), static_cast<int64_t>(x.size())), -1);
  EXPECT_EQ(FindNonFinite(x.data(), 0), -1);
}

TEST(FiniteTest, FindsNanPositiveAndNegativeInfinityAtTheirIndex) {
  const float nan_negative = FromBits(0xffc00000);  // -nan, as a diverged loss often prints
  const float signalling = FromBits(0x7f800001);    // the smallest NaN payload
  for (const float bad : {kNan, nan_negative, signalling, kInf, -kInf}) {
    // Inside the first block, at the very end of a long buffer, and right after a block edge:
    // the block test and the element search must agree everywhere.
    for (const int64_t n : {int64_t{7}, int64_t{4096}, int64_t{4097}, int64_t{10000}}) {
      for (const int64_t at : {int64_t{0}, n / 2, n - 1}) {
        std::vector<float> x(static_cast<size_t>(n), 0.5f);
        x[static_cast<size_t>(at)] = bad;
        EXPECT_EQ(FindNonFinite(x.data(), n), at) << bad << " at " << at << " of " << n;
      }
    }
  }
}

TEST(FiniteTest, ReportsTheFirstOfSeveral) {
  std::vector<float> x(9000, 1.0f);
  x[8000] = kNan;
  x[5000] = -kInf;
  x[4500] = kInf;
  EXPECT_EQ(FindNonFinite(x.data(), 9000), 4500);
  EXPECT_EQ(FindNonFinite(x.data(), 4500), -1);  // n bounds the search
}

TEST(FiniteTest, DescribesValuesAsMessagesShowThem) {
  EXPECT_EQ(DescribeValue(std::nan("")), "nan");
  EXPECT_EQ(DescribeValue(-std::nan("")), "nan");
  EXPECT_EQ(DescribeValue(INFINITY), "inf");
  EXPECT_EQ(DescribeValue(-INFINITY), "-inf");
  EXPECT_EQ(DescribeValue(2.5), "2.5");
}

}  // namespace
}  // namespace towerps
