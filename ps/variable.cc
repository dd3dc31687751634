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
    if (v.kind != VariableKind::kTrainable) {
      const auto kind = static_cast<uint8_t>(v.kind);
      h = Fnv1a(&kind, 1, h);
      h = Fnv1a(&v.decay, sizeof(v.decay), h);
    }
  }
  return h;
}

Status ValidateVariableKind(const VariableSpec& v) {
  switch (v.kind) {
    case VariableKind::kTrainable:
      return Status::Ok();
    case VariableKind::kMovingAverage:
      if (v.decay >= 0.0f && v.decay < 1.0f) return Status::Ok();
      return InvalidArgumentError("variable " + v.name + ": moving-average decay " +
                                  std::to_string(v.decay) + " is not in [0, 1)");
  }
  return InvalidArgumentError("variable " + v.name + ": unknown kind " +
                              std::to_string(static_cast<int>(v.kind)));
}

}  // namespace towerps::ps
