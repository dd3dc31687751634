// PreviousRows: a sync table partition's rows one version back, for the rows its last update
// changed or its policy evicted (ps/server/row_policy.h): with them a worker restarted during
// step t pulls exactly version t after the partition moved to t + 1 (TableChunk::Lookup), as a
// dense chunk keeps its previous version. A row not kept here was the same one version back.
//
// Contract: owned and used by one partition, on its thread; not thread-safe.
#ifndef TOWERPS_PS_SERVER_PREVIOUS_ROWS_H_
#define TOWERPS_PS_SERVER_PREVIOUS_ROWS_H_

#include <cstdint>
#include <vector>

#include "common/tensor.h"
#include "job/version.h"
#include "towerps/result.h"

namespace towerps::ps {

struct TableState;

class PreviousRows {
 public:
  explicit PreviousRows(int64_t dim) : dim_(dim) {}

  int64_t version() const { return version_; }
  // An update from `version` begins: the rows kept for the one before are forgotten.
  void Begin(int64_t version);
  // Keeps row `id`'s values before the update; ids come in increasing order.
  void Keep(uint64_t id, const float* values);
  // Keeps an evicted row's values, unless the update kept them already; in any order, and
  // FinishEvictions puts them in place.
  void KeepEvicted(uint64_t id, const float* values);
  void FinishEvictions();
  // Row `id`'s values one version back, or null when they were its current ones.
  const float* Find(uint64_t id) const;

  // Into and out of a replica's state (previous_version, previous_ids, previous_values). Check
  // says whether a state's shapes add up (the ids are the partition's to check); Load takes a
  // checked one.
  void Save(TableState* s) const;
  Status Check(const TableState& s) const;
  void Load(const TableState& s);

 private:
  const int64_t dim_;
  int64_t version_ = kNoVersion;
  std::vector<uint64_t> ids_;  // increasing
  std::vector<float> values_;  // dim_ each
  size_t kept_ = 0;            // ids_[0, kept_) are the update's; the rest evicted, unsorted
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_PREVIOUS_ROWS_H_
