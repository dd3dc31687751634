// ThreadPool: a fixed set of threads that run one ParallelFor at a time; the calling thread takes
// part, so a pool of size 1 starts no thread and runs everything inline.
//
// Contract:
//  - ParallelFor splits the range into pieces that threads claim dynamically, so a thread that
//    the OS deschedules (these machines are shared) delays nothing: the others take its pieces.
//    It blocks until every piece has run. Pieces must not throw.
//  - fn receives the id (< size()) of the thread running the piece, for per-thread scratch; one
//    thread may run several pieces, never two at once.
//  - Not re-entrant and not thread-safe: one caller at a time, and fn must not call back into the
//    same pool. Owned by one CpuBackend.
//  - Idle workers spin briefly (so that back-to-back parallel regions in a training step do not
//    pay a futex wake-up each), then sleep on a condition variable.
#ifndef TOWERPS_KERNELS_CPU_THREAD_POOL_H_
#define TOWERPS_KERNELS_CPU_THREAD_POOL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "common/mutex.h"

namespace towerps::kernels::cpu {

class ThreadPool {
 public:
  using Fn = std::function<void(int thread, int64_t begin, int64_t end)>;

  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return size_; }

  // Runs fn over [0, n) in contiguous pieces of at least `grain` items (at most
  // kPiecesPerThread * size() pieces).
  void ParallelFor(int64_t n, int64_t grain, const Fn& fn);

  static constexpr int kPiecesPerThread = 4;

 private:
  struct Job {
    const Fn* fn;
    int64_t n;
    int pieces;
    std::atomic<int> next{0};  // next piece to claim
    std::atomic<int> done{0};  // pieces finished
  };
  static void RunPieces(Job& job, int thread);
  void WorkerLoop(int index);

  const int size_;
  std::vector<std::thread> workers_;
  Mutex mu_;
  CondVar wake_;
  std::atomic<uint64_t> generation_{0};  // bumped once per posted job, under mu_
  std::shared_ptr<Job> job_ GUARDED_BY(mu_);
  bool stop_ GUARDED_BY(mu_) = false;
};

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_THREAD_POOL_H_
