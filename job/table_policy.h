// TablePolicy: how an embedding table bounds the rows its servers hold. The servers apply it
// (ps/server/row_policy.h); this is the option, set for every table by flags and per table by
// overrides.
//
//   admission  an id gets a row only once it has appeared in `admission_min_count` updates'
//              pushes (in sync, steps; in async, each worker's push is an update), and only if the
//              hash of (seed, table, id) falls below `admission_probability`; until then a lookup
//              reads its initial values and its gradient is dropped (and counted).
//   eviction   a row not updated for `ttl_steps` steps goes; and when a partition holds more
//              than its share of `capacity_rows`, the least-frequently (lfu) or least-recently
//              (lru) updated rows go. An evicted id that comes back starts again, from its
//              initial values.
//   storage    memory (every row in RAM) or rocksdb: each server keeps the table's hottest rows
//              within `memory_mb` (its partitions share it) and the rest on disk, in a RocksDB
//              tier in its --table-dir (ps/server/table_rows.h); rows read back from disk have
//              the bits they left with. capacity_rows does not combine with it (bound the rows on
//              disk with a TTL).
//   placement  rows (the table's rows hashed over every server, --table-partitions on each) or
//              whole (the whole table on one server, one partition; job/placement.h). Whole tables
//              cost a worker one message part per table a step instead of one per server: for
//              many small tables. A whole table's rows, memory and updates are all one server's,
//              and capacity_rows bounds the whole table (by rows, each server's share of it).
//
// The defaults (1, 1, 0, 0, memory, rows) admit every id at once and keep every row forever: the
// table as it was before policies.
//
// Overrides: "NAME:KEY=VALUE" items, comma-separated (--table-policy), KEY one of min_count,
// probability, ttl_steps, capacity_rows, eviction, storage, memory_mb, placement; a later item
// wins over an earlier one.
//
// A model may declare a table's policy too (VariableSpec::policy: PyTorch's
// DistributedOptimizer(tables=...)): "KEY=VALUE" items with the keys of admission and eviction
// only, since where the servers keep rows (storage, memory_mb, placement) is the launcher's to
// say. A
// table's policy is the --table-* defaults, then its declaration, then its --table-policy items.
//
// Contract: plain values and pure functions; thread-compatible. Every error is kInvalidArgument
// naming the flag or the table, the key and the value.
#ifndef TOWERPS_JOB_TABLE_POLICY_H_
#define TOWERPS_JOB_TABLE_POLICY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/enum_names.h"
#include "job/table_keys.h"
#include "job/variable.h"
#include "towerps/result.h"

namespace towerps::ps {

enum class EvictionOrder { kLfu, kLru };
inline constexpr EnumNames<EvictionOrder, 2> kEvictionOrders{
    "--table-eviction", {{{EvictionOrder::kLfu, "lfu"}, {EvictionOrder::kLru, "lru"}}}};

enum class TableStorage { kMemory, kRocksdb };
inline constexpr EnumNames<TableStorage, 2> kTableStorages{
    "--table-storage", {{{TableStorage::kMemory, "memory"}, {TableStorage::kRocksdb, "rocksdb"}}}};

enum class TablePlacement { kRows, kWhole };
inline constexpr EnumNames<TablePlacement, 2> kTablePlacements{
    "--table-placement", {{{TablePlacement::kRows, "rows"}, {TablePlacement::kWhole, "whole"}}}};

inline constexpr int64_t kMaxTtlSteps = (int64_t{1} << 31) - 1;
inline constexpr int64_t kMaxCapacityRows = int64_t{1} << 40;
inline constexpr int64_t kMaxMemoryMb = int64_t{1} << 30;

struct TablePolicy {
  int64_t admission_min_count = 1;     // steps an id must appear in before it gets a row
  float admission_probability = 1.0f;  // share of ids that may ever get one, by hash
  int64_t ttl_steps = 0;               // 0: rows never expire
  int64_t capacity_rows = 0;  // rows per server (each partition an equal share, >= 1); 0: none
  EvictionOrder eviction = EvictionOrder::kLfu;
  TableStorage storage = TableStorage::kMemory;
  // rocksdb: each server's megabytes (2^20 bytes) for the table's rows in memory (> 0; a
  // fraction too, for small tables and tests)
  float memory_mb = 0.0f;
  TablePlacement placement = TablePlacement::kRows;

  bool AdmitsEveryId() const { return admission_min_count <= 1 && admission_probability >= 1.0f; }
  bool Evicts() const { return ttl_steps > 0 || capacity_rows > 0; }
  // "every id, kept forever", or e.g. "admitted after 2 steps, ttl 100 steps, at most 10000
  // rows per server (lfu)": for --log-device-placement and start-up logs.
  std::string Describe() const;
  // Checks every field; the error names `where` ("--table-ttl-steps" style flags when `table`
  // is empty, else "table 'emb_3': ttl_steps") and the value.
  // Validate checks the fields' ranges (ValidateFields) and how they combine.
  Status Validate(std::string_view table = {}) const;
  Status ValidateFields(std::string_view table = {}) const;
  bool operator==(const TablePolicy&) const = default;
};

// One override item, parsed: the table, the key and its value (text, checked by Apply).
struct TablePolicyOverride {
  std::string table;
  std::string key;
  std::string value;
};

// Every table's policy: the defaults (the --table-* flags) and the per-table overrides.
struct TablePolicies {
  TablePolicy defaults;
  std::string overrides;  // --table-policy, as given: "NAME:KEY=VALUE,..."

  // Checks the defaults and every override item (syntax, key, value).
  Status Validate() const;
  // The policy of table `name`: the defaults, its model's declaration (`declared`) and its
  // overrides, applied in order. Both must have passed their checks (a bad item is skipped here).
  TablePolicy For(std::string_view name, std::string_view declared = {}) const;
  TablePolicy For(const VariableSpec& table) const { return For(table.name, table.policy); }
  // The tables the overrides name, each once, in the order first named: the caller checks them
  // against the job's tables (an override of no table is an error, not a no-op).
  std::vector<std::string> NamedTables() const;
  bool Any() const { return defaults != TablePolicy{} || !overrides.empty(); }
  // Whether some table may be placed by rows: the defaults, or an override saying so.
  bool AnyPlacedByRows() const;
  // What puts a table on disk ("--table-storage=rocksdb", or "--table-policy: table 'emb_3':
  // storage=rocksdb"), empty when nothing does: the servers then need a --table-dir.
  std::string DiskUser() const;
};

// Checks the policies against the model's tables: every table the overrides name is one of them
// (an override of no table is kInvalidArgument naming it and listing the tables, not a silent
// no-op), and every table's declared policy is well formed, uses only the keys a model may
// declare, and combines with the flags (kInvalidArgument naming the table, the key and value).
Status CheckTablePolicies(const TablePolicies& policies,
                          const std::vector<VariableSpec>& variables);
// One table's part of that: its declaration, and how it combines with the flags.
Status CheckTablePolicy(const TablePolicies& policies, const VariableSpec& table);
// Each table's policy, a line each ("table emb_3: ttl 100 steps"), for --log-device-placement.
std::string DescribeTablePolicies(const TablePolicies& policies,
                                  const std::vector<VariableSpec>& variables);

// The items of an overrides text; kInvalidArgument naming the item that is not NAME:KEY=VALUE.
Result<std::vector<TablePolicyOverride>> ParseTablePolicyOverrides(std::string_view text);
// The items of table `table`'s declared policy ("KEY=VALUE,..."); kInvalidArgument naming the
// table and the item that is not KEY=VALUE.
Result<std::vector<TablePolicyOverride>> DeclaredItems(std::string_view table,
                                                       std::string_view declared);

// Probabilistic admission's coin: whether id `id` of a table may ever be admitted under
// probability p, from a hash of (seed, table name, id) compared with p, a joined table's by its
// segments' names (job/table_keys.h). The same on every process and every run; independent of
// the table's initial values (job/initial_rows.h).
class AdmissionCoin {
 public:
  AdmissionCoin(uint64_t seed, const VariableSpec& table, float p);
  bool Admits(uint64_t id) const;

 private:
  TableKeys keys_;
  uint64_t threshold_;  // ids whose hash is below it pass; 2^64 - 1 and p = 1: every id
  bool all_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_TABLE_POLICY_H_
