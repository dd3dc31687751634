#include "ps/variable.h"

#include "common/hash.h"

namespace towerps::ps {

uint64_t VariableListHash(const std::vector<VariableSpec>& variables) {
  uint64_t h = Fnv1aU64(variables.size(), kFnv1aOffsetBasis);
  for (const VariableSpec& v : variables) {
    h = Fnv1aU64(v.name.size(), h);
    h = Fnv1a(v.name.data(), v.name.size(), h);
    h = Fnv1aU64(v.shape.size(), h);
    for (int64_t d : v.shape) h = Fnv1aU64(static_cast<uint64_t>(d), h);
    const auto dtype = static_cast<uint8_t>(v.dtype);
    h = Fnv1a(&dtype, 1, h);
  }
  return h;
}

}  // namespace towerps::ps
