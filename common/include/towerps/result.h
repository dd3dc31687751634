// Result<T>: a value or a non-OK Status.
//
// Contract: a Result built from a Status must be given a non-OK one (an OK Status carries no
// value; that is a programming error caught by TOWERPS_CHECK). value() on an error Result is a
// programming error too. Thread safety as for any value type.
#ifndef TOWERPS_RESULT_H_
#define TOWERPS_RESULT_H_

#include <optional>
#include <utility>

#include "towerps/check.h"
#include "towerps/status.h"

namespace towerps {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(runtime/explicit): implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT(runtime/explicit)
    TOWERPS_CHECK(!status_.ok()) << "Result constructed from an OK Status without a value";
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & {
    TOWERPS_CHECK(ok()) << "value() on an error Result: " << status_.ToString();
    return *value_;
  }
  const T& value() const& {
    TOWERPS_CHECK(ok()) << "value() on an error Result: " << status_.ToString();
    return *value_;
  }
  T&& value() && {
    TOWERPS_CHECK(ok()) << "value() on an error Result: " << status_.ToString();
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::optional<T> value_;
  Status status_;  // OK exactly when value_ is set
};

}  // namespace towerps

#define TOWERPS_CONCAT_INNER_(a, b) a##b
#define TOWERPS_CONCAT_(a, b) TOWERPS_CONCAT_INNER_(a, b)

// TOWERPS_ASSIGN_OR_RETURN(auto x, MakeX()); returns the Status from the enclosing function on
// error, otherwise moves the value into `lhs`.
#define TOWERPS_ASSIGN_OR_RETURN(lhs, expr) \
  TOWERPS_ASSIGN_OR_RETURN_IMPL_(TOWERPS_CONCAT_(_towerps_result_, __LINE__), lhs, expr)
#define TOWERPS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()

#endif  // TOWERPS_RESULT_H_
