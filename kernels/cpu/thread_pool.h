// ThreadPool: a fixed set of threads that run one ParallelFor at a time; the calling thread takes
// part, so a pool of size 1 starts no thread and runs everything inline.
//
// Contract:
//  - ParallelFor blocks until every chunk has run. Chunks must not throw.
//  - Not re-entrant and not thread-safe: one caller at a time, and fn must not call back into the
//    same pool. Owned by one CpuBackend.
//  - Idle workers spin briefly (so that back-to-back parallel regions in a training step do not
//    pay a futex wake-up each), then sleep on a condition variable.
#ifndef TOWERPS_KERNELS_CPU_THREAD_POOL_H_
#define TOWERPS_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace towerps::kernels::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  // Splits [0, n) into at most size() contiguous chunks of at least `grain` items and calls
  // fn(chunk_index, begin, end) for each, chunk_index < size().
  void ParallelFor(int64_t n, int64_t grain,
                   const std::function<void(int chunk, int64_t begin, int64_t end)>& fn);

 private:
  void WorkerLoop(int index);

  const int size_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};  // bumped once per ParallelFor
  std::atomic<int> pending_{0};          // chunks not yet finished by workers
  std::atomic<bool> stop_{false};
  // The current job, written before generation_ is bumped.
  const std::function<void(int, int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int chunks_ = 0;
};

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_THREAD_POOL_H_
