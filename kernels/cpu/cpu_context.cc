#include "kernels/cpu/cpu_context.h"

namespace towerps::kernels::cpu {
namespace {

// Elementwise loops shorter than this run on one thread.
constexpr int64_t kParallelElements = int64_t{1} << 16;

}  // namespace

CpuContext::CpuContext(int threads)
    : pool_(threads),
      scratch_(static_cast<size_t>(threads)),
      partial_dw_(static_cast<size_t>(threads)) {}

float* CpuContext::Scratch(int chunk, size_t floats) {
  auto& buf = scratch_[static_cast<size_t>(chunk)];
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

void CpuContext::ForEachRange(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool_.size() == 1 || n < kParallelElements) {
    fn(0, n);
    return;
  }
  pool_.ParallelFor(n, kParallelElements / 2, [&](int, int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace towerps::kernels::cpu
