// TableKeys: what a table draws by id from (seed, its name) - a row's initial values
// (job/initial_rows.h), the admission coin (job/table_policy.h) - keyed by the name, or for a
// joined table (VariableSpec::segments) by the name of the segment holding the id, with the id
// within that segment. So a joined table's row offset_k + i draws what row i of segment k's own
// table would, and joining tables changes no bit of them.
//
// Contract: an immutable value; For is a pure function, thread-safe.
#ifndef TOWERPS_JOB_TABLE_KEYS_H_
#define TOWERPS_JOB_TABLE_KEYS_H_

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

#include "job/variable.h"

namespace towerps::ps {

class TableKeys {
 public:
  // A name's key (its hash with the seed and the draw's own salt).
  using KeyOf = std::function<uint64_t(std::string_view name)>;
  // A table named `table`, of no segments.
  TableKeys(std::string_view table, const KeyOf& key);
  // The table `variable`: its name's key, or each segment's.
  TableKeys(const VariableSpec& variable, const KeyOf& key);

  struct Keyed {
    uint64_t key;  // the table's, or the segment's
    uint64_t id;   // within the segment
  };
  Keyed For(uint64_t id) const;

 private:
  std::vector<uint64_t> keys_;
  std::vector<uint64_t> starts_;  // segment k's ids start at starts_[k]; starts_[0] = 0
};

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_TABLE_KEYS_H_
