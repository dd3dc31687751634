#include "job/table_keys.h"

#include <algorithm>

namespace towerps::ps {

TableKeys::TableKeys(std::string_view table, const KeyOf& key) : keys_{key(table)}, starts_{0} {}

TableKeys::TableKeys(const VariableSpec& variable, const KeyOf& key)
    : TableKeys(variable.name, key) {
  if (variable.segments.empty()) return;
  keys_.clear();
  starts_.clear();
  uint64_t start = 0;
  for (const TableSegment& s : variable.segments) {
    keys_.push_back(key(s.name));
    starts_.push_back(start);
    start += static_cast<uint64_t>(s.rows);
  }
}

TableKeys::Keyed TableKeys::For(uint64_t id) const {
  // The last segment starting at or below id (a table of its own: its one key).
  const auto k =
      static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), id) - starts_.begin()) -
      1;
  return {.key = keys_[k], .id = id - starts_[k]};
}

}  // namespace towerps::ps
