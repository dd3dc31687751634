#include "job/table_policy.h"

#include <algorithm>
#include <cmath>

#include "common/hash.h"
#include "common/parse.h"
#include "common/splitmix.h"

namespace towerps::ps {
namespace {

constexpr const char* kKeys =
    "min_count, probability, ttl_steps, capacity_rows, eviction, storage, memory_mb or placement";

// Where a field's error points: its flag for the defaults, "table 'NAME': key" for an override.
std::string Where(std::string_view table, const char* key, const char* flag) {
  if (table.empty()) return flag;
  return "--table-policy: table '" + std::string(table) + "': " + key;
}

// Sets `key` of `policy` from `text` and checks it; the error names the table, key and value.
Status Set(const std::string& key, const std::string& text, std::string_view table,
           TablePolicy* policy) {
  const std::string where = "--table-policy: table '" + std::string(table) + "': " + key;
  if (key == "min_count") {
    TOWERPS_ASSIGN_OR_RETURN(policy->admission_min_count, ParseInt(text, where));
  } else if (key == "probability") {
    TOWERPS_ASSIGN_OR_RETURN(const double p, ParseDouble(text, where));
    policy->admission_probability = static_cast<float>(p);
  } else if (key == "ttl_steps") {
    TOWERPS_ASSIGN_OR_RETURN(policy->ttl_steps, ParseInt(text, where));
  } else if (key == "capacity_rows") {
    TOWERPS_ASSIGN_OR_RETURN(policy->capacity_rows, ParseInt(text, where));
  } else if (key == "eviction") {
    Result<EvictionOrder> order = kEvictionOrders.Parse(text);
    if (!order.ok()) {
      return InvalidArgumentError(where + "=" + text + " is not one of " + kEvictionOrders.List());
    }
    policy->eviction = *order;
  } else if (key == "storage") {
    Result<TableStorage> storage = kTableStorages.Parse(text);
    if (!storage.ok()) {
      return InvalidArgumentError(where + "=" + text + " is not one of " + kTableStorages.List());
    }
    policy->storage = *storage;
  } else if (key == "memory_mb") {
    TOWERPS_ASSIGN_OR_RETURN(const double mb, ParseDouble(text, where));
    policy->memory_mb = static_cast<float>(mb);
  } else if (key == "placement") {
    Result<TablePlacement> placement = kTablePlacements.Parse(text);
    if (!placement.ok()) {
      return InvalidArgumentError(where + "=" + text + " is not one of " + kTablePlacements.List());
    }
    policy->placement = *placement;
  } else {
    return InvalidArgumentError("--table-policy: table '" + std::string(table) + "': '" + key +
                                "' is not a policy key (" + kKeys + ")");
  }
  return policy->ValidateFields(table);
}

}  // namespace

std::string TablePolicy::Describe() const {
  // Otherwise a field off its default says what the table does instead.
  std::string s = AdmitsEveryId() && !Evicts() && storage == TableStorage::kMemory
                      ? "every id, kept forever"
                      : "";
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (admission_min_count > 1) {
    add("admitted after " + std::to_string(admission_min_count) + " steps");
  }
  if (admission_probability < 1.0f) {
    add("admitted with probability " + ShortestText(admission_probability));
  }
  if (ttl_steps > 0) add("ttl " + std::to_string(ttl_steps) + " steps");
  if (capacity_rows > 0) {
    add("at most " + std::to_string(capacity_rows) + " rows per server (" +
        kEvictionOrders.Name(eviction) + ")");
  }
  if (storage == TableStorage::kRocksdb) {
    add("on disk (rocksdb) beyond " + ShortestText(memory_mb) + " MB per server in memory (" +
        kEvictionOrders.Name(eviction) + ")");
  }
  if (placement == TablePlacement::kWhole) add("whole on one server");
  return s;
}

Status TablePolicy::ValidateFields(std::string_view table) const {
  if (admission_min_count < 1 || admission_min_count > (int64_t{1} << 32) - 1) {
    return InvalidArgumentError(Where(table, "min_count", "--table-admission-min-count") + "=" +
                                std::to_string(admission_min_count) +
                                " is not in [1, 2^32) (1: admitted at once)");
  }
  if (!(admission_probability > 0.0f && admission_probability <= 1.0f)) {
    return InvalidArgumentError(Where(table, "probability", "--table-admission-probability") + "=" +
                                ShortestText(admission_probability) +
                                " is not in (0, 1] (1: every id may be admitted)");
  }
  if (ttl_steps < 0 || ttl_steps > kMaxTtlSteps) {
    return InvalidArgumentError(Where(table, "ttl_steps", "--table-ttl-steps") + "=" +
                                std::to_string(ttl_steps) +
                                " is not in [0, 2^31) (0: rows never expire)");
  }
  if (capacity_rows < 0 || capacity_rows > kMaxCapacityRows) {
    return InvalidArgumentError(Where(table, "capacity_rows", "--table-capacity-rows") + "=" +
                                std::to_string(capacity_rows) +
                                " is not in [0, 2^40] (0: no bound)");
  }
  if (!(memory_mb >= 0.0f && memory_mb <= static_cast<float>(kMaxMemoryMb))) {
    return InvalidArgumentError(Where(table, "memory_mb", "--table-memory-mb") + "=" +
                                ShortestText(memory_mb) + " is not in [0, 2^30]");
  }
  return Status::Ok();
}

Status TablePolicy::Validate(std::string_view table) const {
  TOWERPS_RETURN_IF_ERROR(ValidateFields(table));
  if (storage == TableStorage::kRocksdb && memory_mb <= 0.0f) {
    return InvalidArgumentError(Where(table, "storage", "--table-storage") +
                                "=rocksdb needs a memory budget: set " +
                                Where(table, "memory_mb", "--table-memory-mb") +
                                " (each server's megabytes of the table's rows in memory)");
  }
  if (storage == TableStorage::kMemory && memory_mb > 0.0f) {
    return InvalidArgumentError(Where(table, "memory_mb", "--table-memory-mb") + "=" +
                                ShortestText(memory_mb) +
                                " bounds the memory tier of storage=rocksdb; this table's "
                                "storage is memory (set storage to rocksdb, or drop memory_mb)");
  }
  if (storage == TableStorage::kRocksdb && capacity_rows > 0) {
    return InvalidArgumentError(Where(table, "capacity_rows", "--table-capacity-rows") + "=" +
                                std::to_string(capacity_rows) +
                                " does not combine with storage=rocksdb, whose rows beyond memory "
                                "go to disk; bound them with ttl_steps instead");
  }
  return Status::Ok();
}

namespace {

// The comma-separated items of `text` (none when it is empty; an empty item is kept, for the
// caller to refuse).
std::vector<std::string_view> CommaItems(std::string_view text) {
  std::vector<std::string_view> items;
  for (size_t begin = 0; !text.empty() && begin <= text.size();) {
    const size_t end = std::min(text.find(',', begin), text.size());
    items.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return items;
}

}  // namespace

Result<std::vector<TablePolicyOverride>> ParseTablePolicyOverrides(std::string_view text) {
  std::vector<TablePolicyOverride> items;
  for (const std::string_view item : CommaItems(text)) {
    const size_t colon = item.rfind(':');
    const size_t equals = item.find('=', colon == std::string_view::npos ? 0 : colon);
    if (colon == std::string_view::npos || colon == 0 || equals == std::string_view::npos ||
        equals == colon + 1 || equals + 1 == item.size()) {
      return InvalidArgumentError("--table-policy: '" + std::string(item) +
                                  "' is not NAME:KEY=VALUE (for example emb_3:ttl_steps=1000; "
                                  "items are separated by commas)");
    }
    items.push_back({std::string(item.substr(0, colon)),
                     std::string(item.substr(colon + 1, equals - colon - 1)),
                     std::string(item.substr(equals + 1))});
  }
  return items;
}

Result<std::vector<TablePolicyOverride>> DeclaredItems(std::string_view table,
                                                       std::string_view declared) {
  std::vector<TablePolicyOverride> items;
  for (const std::string_view item : CommaItems(declared)) {
    const size_t equals = item.find('=');
    if (equals == std::string_view::npos || equals == 0 || equals + 1 == item.size()) {
      return InvalidArgumentError("table '" + std::string(table) + "': the model's policy item '" +
                                  std::string(item) +
                                  "' is not KEY=VALUE (for example "
                                  "ttl_steps=1000; items are separated by commas)");
    }
    items.push_back({std::string(table), std::string(item.substr(0, equals)),
                     std::string(item.substr(equals + 1))});
  }
  return items;
}

Status TablePolicies::Validate() const {
  TOWERPS_RETURN_IF_ERROR(defaults.Validate());
  TOWERPS_ASSIGN_OR_RETURN(const std::vector<TablePolicyOverride> items,
                           ParseTablePolicyOverrides(overrides));
  TablePolicy scratch = defaults;
  for (const TablePolicyOverride& o : items) {
    TOWERPS_RETURN_IF_ERROR(Set(o.key, o.value, o.table, &scratch));
  }
  for (const std::string& table : NamedTables()) {  // each table's keys together
    TOWERPS_RETURN_IF_ERROR(For(table).Validate(table));
  }
  for (const TablePolicyOverride& o : items) {  // a budget given to a table kept in memory
    if (o.key == "memory_mb" && For(o.table).storage == TableStorage::kMemory) {
      return InvalidArgumentError("--table-policy: table '" + o.table + "': memory_mb=" + o.value +
                                  " bounds the memory tier of storage=rocksdb; this table's "
                                  "storage is memory (set storage to rocksdb, or drop memory_mb)");
    }
  }
  return Status::Ok();
}

std::string TablePolicies::DiskUser() const {
  if (defaults.storage == TableStorage::kRocksdb) return "--table-storage=rocksdb";
  for (const std::string& table : NamedTables()) {
    if (For(table).storage == TableStorage::kRocksdb) {
      return "--table-policy: table '" + table + "': storage=rocksdb";
    }
  }
  return "";
}

TablePolicy TablePolicies::For(std::string_view name, std::string_view declared) const {
  TablePolicy policy = defaults;
  auto apply = [&](const Result<std::vector<TablePolicyOverride>>& items) {
    if (!items.ok()) return;
    for (const TablePolicyOverride& o : *items) {
      if (o.table != name) continue;
      TablePolicy next = policy;
      if (Set(o.key, o.value, o.table, &next).ok()) policy = next;
    }
  };
  apply(DeclaredItems(name, declared));
  apply(ParseTablePolicyOverrides(overrides));
  // A table an override keeps in memory takes no budget from the defaults' disk storage.
  if (policy.storage == TableStorage::kMemory) policy.memory_mb = 0.0f;
  return policy;
}

bool TablePolicies::AnyPlacedByRows() const {
  if (defaults.placement == TablePlacement::kRows) return true;
  Result<std::vector<TablePolicyOverride>> items = ParseTablePolicyOverrides(overrides);
  return items.ok() && std::any_of(items->begin(), items->end(), [](const TablePolicyOverride& o) {
           return o.key == "placement" && o.value == kTablePlacements.Name(TablePlacement::kRows);
         });
}

std::vector<std::string> TablePolicies::NamedTables() const {
  std::vector<std::string> names;
  Result<std::vector<TablePolicyOverride>> items = ParseTablePolicyOverrides(overrides);
  if (!items.ok()) return names;
  for (const TablePolicyOverride& o : *items) {
    if (std::find(names.begin(), names.end(), o.table) == names.end()) names.push_back(o.table);
  }
  return names;
}

Status CheckTablePolicy(const TablePolicies& policies, const VariableSpec& table) {
  TOWERPS_ASSIGN_OR_RETURN(const std::vector<TablePolicyOverride> items,
                           DeclaredItems(table.name, table.policy));
  TablePolicy scratch;
  for (const TablePolicyOverride& o : items) {
    if (o.key == "storage" || o.key == "memory_mb" || o.key == "placement") {
      return InvalidArgumentError("table '" + table.name + "': the model declares " + o.key + "=" +
                                  o.value +
                                  ", but where the servers keep rows is the launcher's to say: "
                                  "give it --table-storage, --table-memory-mb and "
                                  "--table-placement, or --table-policy " +
                                  table.name + ":" + o.key + "=" + o.value);
    }
    TOWERPS_RETURN_IF_ERROR(Set(o.key, o.value, o.table, &scratch));
  }
  return policies.For(table).Validate(table.name);
}

Status CheckTablePolicies(const TablePolicies& policies,
                          const std::vector<VariableSpec>& variables) {
  std::vector<std::string> tables;
  for (const VariableSpec& v : variables) {
    if (!v.is_table()) continue;
    tables.push_back(v.name);
    TOWERPS_RETURN_IF_ERROR(CheckTablePolicy(policies, v));
  }
  for (const std::string& name : policies.NamedTables()) {
    if (std::find(tables.begin(), tables.end(), name) != tables.end()) continue;
    for (const VariableSpec& v : variables) {
      for (const TableSegment& s : v.segments) {
        if (s.name != name) continue;
        return InvalidArgumentError(
            "--table-policy names table '" + name + "', a segment of the joined table '" + v.name +
            "' (a fused EmbeddingBagCollection's field): a policy is the joined " +
            "table's; name '" + v.name + "', or make the collection fused=False");
      }
    }
    std::string list;
    for (const std::string& t : tables) list += (list.empty() ? "" : ", ") + t;
    return InvalidArgumentError(
        "--table-policy names table '" + name +
        "', which this model does not have (its tables: " + (list.empty() ? "none" : list) + ")");
  }
  return Status::Ok();
}

std::string DescribeTablePolicies(const TablePolicies& policies,
                                  const std::vector<VariableSpec>& variables) {
  std::string lines;
  for (const VariableSpec& v : variables) {
    if (!v.is_table()) continue;
    lines += (lines.empty() ? "" : "\n") + ("table " + v.name + ": " + policies.For(v).Describe());
  }
  return lines;
}

AdmissionCoin::AdmissionCoin(uint64_t seed, const VariableSpec& table, float p)
    // A salt apart from InitialRows' key, so that the coin and a row's values are independent.
    : keys_(table,
            [seed](std::string_view name) {
              return SplitMix64Finalize(Fnv1a(name.data(), name.size(),
                                              Fnv1aU64(seed ^ 0xAD315510Bull, kFnv1aOffsetBasis)));
            }),
      threshold_(p >= 1.0f ? ~uint64_t{0}
                           : static_cast<uint64_t>(std::ldexp(static_cast<double>(p), 64))),
      all_(p >= 1.0f) {}

bool AdmissionCoin::Admits(uint64_t id) const {
  if (all_) return true;
  const TableKeys::Keyed coin = keys_.For(id);
  return SplitMix64Finalize(coin.key ^ SplitMix64Finalize(coin.id)) < threshold_;
}

}  // namespace towerps::ps
