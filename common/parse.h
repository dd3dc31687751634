// Numbers from text: flag values, config-file and JSON fields, environment variables, hostfile
// words. One parser for all of them, on std::from_chars (locale-independent); and the one way a
// float goes back to text (ShortestText).
//
// Contract: pure functions, thread-safe. The whole text must be the number: no spaces, no '+',
// nothing after it. Errors are kInvalidArgument and name `what` (the flag, variable or field,
// e.g. "--towers") and the text, quoted: "--towers: '12x' is not an integer".
#ifndef TOWERPS_COMMON_PARSE_H_
#define TOWERPS_COMMON_PARSE_H_

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

#include "towerps/result.h"

namespace towerps {

// A decimal integer that fits in int64_t.
Result<int64_t> ParseInt(std::string_view text, std::string_view what);

// The same in [min, max], as T (int, int64_t, ...); the error names the range.
template <std::integral T>
requires(sizeof(T) < sizeof(int64_t) ||
         std::signed_integral<T>) Result<T> ParseInt(std::string_view text, std::string_view what,
                                                     T min, T max);

// A finite decimal floating-point number: "0.5", ".5", "1e-3" (not "inf", "nan" or hex).
Result<double> ParseDouble(std::string_view text, std::string_view what);

// The shortest decimal text that reads back as exactly `v`: 0.05f is "0.05", not
// "0.0500000007" (std::to_chars). Flag defaults in --help, job fields, error messages.
std::string ShortestText(float v);

// ---- implementation ----

Result<int64_t> ParseIntInRange(std::string_view text, std::string_view what, int64_t min,
                                int64_t max);

template <std::integral T>
requires(sizeof(T) < sizeof(int64_t) ||
         std::signed_integral<T>) Result<T> ParseInt(std::string_view text, std::string_view what,
                                                     T min, T max) {
  TOWERPS_ASSIGN_OR_RETURN(const int64_t v, ParseIntInRange(text, what, min, max));
  return static_cast<T>(v);
}

}  // namespace towerps

#endif  // TOWERPS_COMMON_PARSE_H_
