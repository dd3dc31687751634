#include "towerps/status.h"

#include <gtest/gtest.h>

#include "towerps/result.h"

namespace towerps {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "ok");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = TimeoutError("server 1 did not answer");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(s.ToString(), "timeout: server 1 did not answer");
}

TEST(StatusTest, OkCodeWithMessageIsOk) { EXPECT_TRUE(Status(StatusCode::kOk, "ignored").ok()); }

TEST(StatusTest, WithContextPrefixesAndKeepsCode) {
  Status s = IoError("disk full").WithContext("saving checkpoint");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "saving checkpoint: disk full");
  EXPECT_TRUE(Status::Ok().WithContext("x").ok());
}

TEST(StatusTest, CopiesCompareEqual) {
  Status a = ProtocolError("bad header");
  Status b = a;
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == ProtocolError("other"));
  EXPECT_FALSE(a == NetworkError("bad header"));
}

TEST(StatusTest, EveryCodeHasADistinctName) {
  std::set<std::string_view> names;
  for (int c = 0; c <= static_cast<int>(StatusCode::kInternal); ++c) {
    names.insert(StatusCodeName(static_cast<StatusCode>(c)));
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(StatusCode::kInternal) + 1);
}

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  TOWERPS_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(ResultTest, ValueAndErrorPropagate) {
  Result<int> q = Quarter(8);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, 2);
  Result<int> bad = Quarter(6);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "odd: 3");
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> r = NotFoundError("nope");
  EXPECT_DEATH((void)r.value(), "value\\(\\) on an error Result");
}

}  // namespace
}  // namespace towerps
