#include "common/parse.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <system_error>

namespace towerps {
namespace {

std::string Quoted(std::string_view what, std::string_view text) {
  return std::string(what) + ": '" + std::string(text) + "'";
}

}  // namespace

Result<int64_t> ParseInt(std::string_view text, std::string_view what) {
  return ParseIntInRange(text, what, std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max());
}

Result<int64_t> ParseIntInRange(std::string_view text, std::string_view what, int64_t min,
                                int64_t max) {
  if (text.empty()) return InvalidArgumentError(Quoted(what, text) + " is not an integer");
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) || at != end) {
    return InvalidArgumentError(Quoted(what, text) + " is not an integer");
  }
  if (ec == std::errc::result_out_of_range || v < min || v > max) {
    return InvalidArgumentError(Quoted(what, text) + " is not an integer in [" +
                                std::to_string(min) + ", " + std::to_string(max) + "]");
  }
  return v;
}

Result<double> ParseDouble(std::string_view text, std::string_view what) {
  if (text.empty()) return InvalidArgumentError(Quoted(what, text) + " is not a number");
  double v = 0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) || at != end) {
    return InvalidArgumentError(Quoted(what, text) + " is not a number");
  }
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgumentError(Quoted(what, text) + " is outside the range of a double");
  }
  if (!std::isfinite(v)) {
    return InvalidArgumentError(Quoted(what, text) + " is not a finite number");
  }
  return v;
}

std::string ShortestText(float v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::string("?");
}

}  // namespace towerps
