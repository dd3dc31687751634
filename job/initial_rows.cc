#include "job/initial_rows.h"

#include "common/hash.h"
#include "common/splitmix.h"

namespace towerps::ps {

InitialRows::InitialRows(uint64_t seed, const std::string& table, float init_scale)
    : key_(
          SplitMix64Finalize(Fnv1a(table.data(), table.size(), Fnv1aU64(seed, kFnv1aOffsetBasis)))),
      scale_(init_scale) {}

void InitialRows::Fill(uint64_t id, int64_t dim, float* out) const {
  // (2u - 1) is exact in float for 24-bit u, so the only rounding is the scaling, the same on
  // every machine.
  uint64_t state = key_ ^ SplitMix64Finalize(id);
  for (int64_t j = 0; j < dim; ++j) {
    const float u = static_cast<float>(SplitMix64Next(state) >> 40) * 0x1p-24f;
    out[j] = (2.0f * u - 1.0f) * scale_;
  }
}

}  // namespace towerps::ps
