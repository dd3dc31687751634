#include "kernels/cpu/thread_pool.h"

#include <algorithm>

namespace towerps::kernels::cpu {
namespace {

constexpr int kSpinIterations = 20000;  // roughly tens of microseconds

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) : size_(std::max(threads, 1)) {
  for (int i = 1; i < size_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  wake_.SignalAll();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunPieces(Job& job, int thread) {
  while (true) {
    const int p = job.next.fetch_add(1, std::memory_order_relaxed);
    if (p >= job.pieces) return;
    const int64_t begin = job.n * p / job.pieces, end = job.n * (p + 1) / job.pieces;
    (*job.fn)(thread, begin, end);
    job.done.fetch_add(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const Fn& fn) {
  if (n <= 0) return;
  const int64_t by_grain = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  const int pieces =
      static_cast<int>(std::min<int64_t>(int64_t{size_} * kPiecesPerThread, by_grain));
  if (size_ == 1 || pieces == 1) {
    fn(0, 0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->pieces = pieces;
  {
    MutexLock lock(&mu_);
    job_ = job;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.SignalAll();
  RunPieces(*job, 0);
  // Every piece is claimed; wait for the ones still running elsewhere.
  while (job->done.load(std::memory_order_acquire) != pieces) CpuRelax();
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      CpuRelax();
      gen = generation_.load(std::memory_order_acquire);
    }
    std::shared_ptr<Job> job;
    {
      MutexLock lock(&mu_);
      while (generation_.load() == seen) wake_.Wait(&mu_);  // idle until work or stop
      if (stop_) return;
      // The generation and the job are read together, so a job is never run twice; a job whose
      // pieces are all claimed already is harmless (RunPieces claims nothing).
      seen = generation_.load();
      job = job_;
    }
    if (job) RunPieces(*job, index);
  }
}

}  // namespace towerps::kernels::cpu
