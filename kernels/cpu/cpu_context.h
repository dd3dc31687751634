// CpuContext: what the CPU ops (kernels/cpu/<op>.h) of one CpuBackend share: the thread pool that
// splits an op's work, and per-thread scratch buffers.
//
// Contract: not thread-safe: one op at a time, as the backend's own contract says. Scratch
// buffers grow to the largest request and are reused; their contents do not survive an op.
#ifndef TOWERPS_KERNELS_CPU_CPU_CONTEXT_H_
#define TOWERPS_KERNELS_CPU_CPU_CONTEXT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/cpu/thread_pool.h"

namespace towerps::kernels::cpu {

class CpuContext {
 public:
  // `threads`: the pool's, the calling thread included (1..256, checked by CpuBackend::Create).
  explicit CpuContext(int threads);
  CpuContext(const CpuContext&) = delete;
  CpuContext& operator=(const CpuContext&) = delete;

  ThreadPool& pool() { return pool_; }
  int threads() const { return pool_.size(); }
  // Thread `chunk`'s scratch of at least `floats` elements.
  float* Scratch(int chunk, size_t floats);
  // An elementwise loop over [0, n) as fn(begin, end), split over the pool when n is large.
  void ForEachRange(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
  // Filter-gradient partial sums, one per piece of images (kernels/cpu/conv.h).
  std::vector<std::vector<float>>& partial_dw() { return partial_dw_; }

 private:
  ThreadPool pool_;
  std::vector<std::vector<float>> scratch_;  // one per pool thread
  std::vector<std::vector<float>> partial_dw_;
};

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_CPU_CONTEXT_H_
