#include "kernels/cpu/thread_pool.h"

#include <algorithm>

#include "common/check.h"

namespace towerps::kernels::cpu {
namespace {

constexpr int kSpinIterations = 20000;  // roughly tens of microseconds

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

inline void ChunkRange(int64_t n, int chunks, int index, int64_t* begin, int64_t* end) {
  *begin = n * index / chunks;
  *end = n * (index + 1) / chunks;
}

}  // namespace

ThreadPool::ThreadPool(int threads) : size_(std::max(threads, 1)) {
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int, int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int chunks = static_cast<int>(std::min<int64_t>(size_, by_grain));
  if (chunks == 1) {
    fn(0, 0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    pending_.store(chunks - 1);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  int64_t begin, end;
  ChunkRange(n, chunks, 0, &begin, &end);
  fn(0, begin, end);
  while (pending_.load(std::memory_order_acquire) != 0) CpuRelax();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
      gen = generation_.load();
    }
    if (stop_.load()) return;
    const std::function<void(int, int64_t, int64_t)>* fn;
    int64_t n;
    int chunks;
    {
      // Read the generation with the job it belongs to, so that a job posted after `gen` was
      // observed is not run twice.
      std::lock_guard<std::mutex> lock(mu_);
      seen = generation_.load();
      fn = fn_;
      n = n_;
      chunks = chunks_;
    }
    if (index < chunks) {
      int64_t begin, end;
      ChunkRange(n, chunks, index, &begin, &end);
      (*fn)(index, begin, end);
      pending_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
}

}  // namespace towerps::kernels::cpu
