#include "job/initial_rows.h"

#include "common/hash.h"
#include "common/splitmix.h"

namespace towerps::ps {
namespace {

TableKeys::KeyOf KeyOf(uint64_t seed) {
  return [seed](std::string_view table) {
    return SplitMix64Finalize(Fnv1a(table.data(), table.size(), Fnv1aU64(seed, kFnv1aOffsetBasis)));
  };
}

}  // namespace

InitialRows::InitialRows(uint64_t seed, const std::string& table, float init_scale)
    : keys_(table, KeyOf(seed)), scale_(init_scale) {}

InitialRows::InitialRows(uint64_t seed, const VariableSpec& variable)
    : keys_(variable, KeyOf(seed)), scale_(variable.init_scale) {}

void InitialRows::Fill(uint64_t id, int64_t dim, float* out) const {
  const TableKeys::Keyed row = keys_.For(id);
  // (2u - 1) is exact in float for 24-bit u, so the only rounding is the scaling, the same on
  // every machine.
  uint64_t state = row.key ^ SplitMix64Finalize(row.id);
  for (int64_t j = 0; j < dim; ++j) {
    const float u = static_cast<float>(SplitMix64Next(state) >> 40) * 0x1p-24f;
    out[j] = (2.0f * u - 1.0f) * scale_;
  }
}

}  // namespace towerps::ps
