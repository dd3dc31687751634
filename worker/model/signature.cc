#include "worker/model/signature.h"

namespace towerps::worker {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

void Mix(uint64_t& h, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) {
    h = (h ^ ((value >> (8 * i)) & 0xff)) * kFnvPrime;
  }
}

}  // namespace

uint64_t VariableSignature(const std::vector<ps::VariableSpec>& variables) {
  uint64_t h = kFnvOffset;
  Mix(h, variables.size(), 8);
  for (const ps::VariableSpec& v : variables) {
    Mix(h, v.name.size(), 8);
    for (unsigned char c : v.name) Mix(h, c, 1);
    Mix(h, v.shape.size(), 8);
    for (int64_t d : v.shape) Mix(h, static_cast<uint64_t>(d), 8);
    Mix(h, static_cast<uint64_t>(v.dtype), 1);
  }
  return h;
}

}  // namespace towerps::worker
