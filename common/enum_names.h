// EnumNames: one table per enum of a flag, its values and their names, that feeds the enum's
// name (for logs, command lines and summaries), its parser and its error, and the lists that
// --help and --list-choices print. A name is written once, in the table.
//
//   inline constexpr EnumNames<UpdateMode, 2> kModes{
//       "--mode", {{{UpdateMode::kSync, "sync"}, {UpdateMode::kAsync, "async"}}}};
//   kModes.Parse("asinc")  ->  kInvalidArgument "--mode=asinc is not one of sync, async"
//
// Contract: a constexpr value; every method is a pure function of the table.
#ifndef TOWERPS_COMMON_ENUM_NAMES_H_
#define TOWERPS_COMMON_ENUM_NAMES_H_

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "towerps/result.h"

namespace towerps {

template <typename Enum, size_t N>
class EnumNames {
 public:
  using Entry = std::pair<Enum, const char*>;
  constexpr EnumNames(const char* flag, std::array<Entry, N> entries)
      : flag_(flag), entries_(entries) {}

  // The name of `value`; "?" for a value outside the table (a cast from a bad integer).
  constexpr const char* Name(Enum value) const {
    for (const Entry& e : entries_) {
      if (e.first == value) return e.second;
    }
    return "?";
  }
  // The value named `text`; kInvalidArgument naming the flag, the text and every name.
  Result<Enum> Parse(std::string_view text) const {
    for (const Entry& e : entries_) {
      if (text == e.second) return e.first;
    }
    return InvalidArgumentError(std::string(flag_) + "=" + std::string(text) + " is not one of " +
                                List());
  }
  // Every name, in the table's order.
  std::vector<std::string> Names() const {
    std::vector<std::string> names;
    for (const Entry& e : entries_) names.emplace_back(e.second);
    return names;
  }
  // "sync, async, ssp, softsync".
  std::string List() const {
    std::string list;
    for (const Entry& e : entries_) list += (list.empty() ? "" : ", ") + std::string(e.second);
    return list;
  }
  const std::array<Entry, N>& entries() const { return entries_; }

 private:
  const char* flag_;
  std::array<Entry, N> entries_;
};

}  // namespace towerps

#endif  // TOWERPS_COMMON_ENUM_NAMES_H_
