#include "common/parse.h"

#include <gtest/gtest.h>

#include <limits>

namespace towerps {
namespace {

// The error's message, or "ok" when there is none.
template <typename T>
std::string Error(const Result<T>& r) {
  return r.ok() ? "ok" : r.status().message();
}

TEST(ParseIntTest, GoodValues) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, int64_t>>{
           {"0", 0},
           {"42", 42},
           {"-7", -7},
           {"007", 7},
           {"9223372036854775807", std::numeric_limits<int64_t>::max()},
           {"-9223372036854775808", std::numeric_limits<int64_t>::min()}}) {
    Result<int64_t> r = ParseInt(text, "--n");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, want) << text;
  }
}

TEST(ParseIntTest, RejectsEmptyGarbageAndOverflowNamingTheFlagAndText) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "--towers: '' is not an integer"},
           {"12x", "--towers: '12x' is not an integer"},
           {"x12", "--towers: 'x12' is not an integer"},
           {" 12", "--towers: ' 12' is not an integer"},
           {"12 ", "--towers: '12 ' is not an integer"},
           {"+12", "--towers: '+12' is not an integer"},
           {"1.5", "--towers: '1.5' is not an integer"},
           {"9223372036854775808", "--towers: '9223372036854775808' is not an integer in ["},
           {"-99999999999999999999", "--towers: '-99999999999999999999' is not an integer in"},
       }) {
    Result<int64_t> r = ParseInt(text, "--towers");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(Error(r).find(why), std::string::npos) << Error(r);
  }
}

TEST(ParseIntTest, RangeAndType) {
  Result<int> r = ParseInt("65535", "--port", 1, 65535);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, 65535);
  EXPECT_EQ(Error(ParseInt("65536", "--port", 1, 65535)),
            "--port: '65536' is not an integer in [1, 65535]");
  EXPECT_EQ(Error(ParseInt("0", "--port", 1, 65535)),
            "--port: '0' is not an integer in [1, 65535]");
  // Beyond int64_t, with a narrow range, the message still gives that range.
  EXPECT_EQ(Error(ParseInt("99999999999999999999", "slots", 1, 8)),
            "slots: '99999999999999999999' is not an integer in [1, 8]");
  Result<uint8_t> byte = ParseInt<uint8_t>("255", "b", 0, 255);
  ASSERT_TRUE(byte.ok()) << byte.status();
  EXPECT_EQ(*byte, 255);
}

TEST(ParseDoubleTest, GoodValues) {
  for (const auto& [text, want] : std::vector<std::pair<std::string, double>>{
           {"0", 0.0}, {"0.5", 0.5}, {".5", 0.5}, {"-2", -2.0}, {"1e-3", 1e-3}, {"40", 40.0}}) {
    Result<double> r = ParseDouble(text, "--lr");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, want) << text;
  }
}

TEST(ParseDoubleTest, RejectsEmptyGarbageOverflowAndNonFinite) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"", "--straggler delay: '' is not a number"},
           {"12x", "--straggler delay: '12x' is not a number"},
           {"ms", "--straggler delay: 'ms' is not a number"},
           {"0x10", "--straggler delay: '0x10' is not a number"},
           {"1e999", "--straggler delay: '1e999' is outside the range of a double"},
           {"inf", "--straggler delay: 'inf' is not a finite number"},
           {"nan", "--straggler delay: 'nan' is not a finite number"},
       }) {
    Result<double> r = ParseDouble(text, "--straggler delay");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(Error(r), why);
  }
}

}  // namespace
}  // namespace towerps
