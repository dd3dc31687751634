#include "job/initial_rows.h"

#include <algorithm>

#include "common/hash.h"
#include "common/splitmix.h"

namespace towerps::ps {
namespace {

uint64_t TableKey(uint64_t seed, const std::string& table) {
  return SplitMix64Finalize(Fnv1a(table.data(), table.size(), Fnv1aU64(seed, kFnv1aOffsetBasis)));
}

}  // namespace

InitialRows::InitialRows(uint64_t seed, const std::string& table, float init_scale)
    : keys_{TableKey(seed, table)}, starts_{0}, scale_(init_scale) {}

InitialRows::InitialRows(uint64_t seed, const VariableSpec& variable)
    : InitialRows(seed, variable.name, variable.init_scale) {
  if (variable.segments.empty()) return;
  keys_.clear();
  starts_.clear();
  uint64_t start = 0;
  for (const TableSegment& s : variable.segments) {
    keys_.push_back(TableKey(seed, s.name));
    starts_.push_back(start);
    start += static_cast<uint64_t>(s.rows);
  }
}

void InitialRows::Fill(uint64_t id, int64_t dim, float* out) const {
  // The segment holding id: the last one starting at or below it (a table of its own: the one).
  const size_t k =
      static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), id) - starts_.begin()) -
      1;
  // (2u - 1) is exact in float for 24-bit u, so the only rounding is the scaling, the same on
  // every machine.
  uint64_t state = keys_[k] ^ SplitMix64Finalize(id - starts_[k]);
  for (int64_t j = 0; j < dim; ++j) {
    const float u = static_cast<float>(SplitMix64Next(state) >> 40) * 0x1p-24f;
    out[j] = (2.0f * u - 1.0f) * scale_;
  }
}

}  // namespace towerps::ps
