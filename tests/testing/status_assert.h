// Assertions on Status and Result for GoogleTest, so that a failure fails one test with the
// status's message instead of aborting the whole binary in Result::value().
//
//   ASSERT_OK(Status or Result expression);
//   ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(builder, &backend, 1));
//
// Like ASSERT_*, they return from the enclosing function on failure, so they belong in TEST
// bodies and in helpers that return void.
#ifndef TOWERPS_TESTS_TESTING_STATUS_ASSERT_H_
#define TOWERPS_TESTS_TESTING_STATUS_ASSERT_H_

#include <gtest/gtest.h>

#include <utility>

#include "towerps/result.h"
#include "towerps/status.h"

namespace towerps::testing {

inline const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const Result<T>& r) {
  return r.status();
}

}  // namespace towerps::testing

#define TOWERPS_TEST_CONCAT_INNER(a, b) a##b
#define TOWERPS_TEST_CONCAT(a, b) TOWERPS_TEST_CONCAT_INNER(a, b)

#define ASSERT_OK(expr)                                                       \
  do {                                                                        \
    const auto& towerps_assert_ok_ = (expr);                                  \
    ASSERT_TRUE(::towerps::testing::StatusOf(towerps_assert_ok_).ok())        \
        << #expr << ": " << ::towerps::testing::StatusOf(towerps_assert_ok_); \
  } while (false)

#define EXPECT_OK(expr)                                                       \
  do {                                                                        \
    const auto& towerps_expect_ok_ = (expr);                                  \
    EXPECT_TRUE(::towerps::testing::StatusOf(towerps_expect_ok_).ok())        \
        << #expr << ": " << ::towerps::testing::StatusOf(towerps_expect_ok_); \
  } while (false)

#define TOWERPS_ASSERT_OK_AND_ASSIGN_IMPL(result, lhs, expr)    \
  auto result = (expr);                                         \
  ASSERT_TRUE(result.ok()) << #expr << ": " << result.status(); \
  lhs = std::move(result).value()

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  TOWERPS_ASSERT_OK_AND_ASSIGN_IMPL(TOWERPS_TEST_CONCAT(towerps_result_, __LINE__), lhs, expr)

#endif  // TOWERPS_TESTS_TESTING_STATUS_ASSERT_H_
