// ThreadPool: every index runs exactly once, thread ids stay in range, and thousands of
// back-to-back jobs (the pattern of a training step) neither lose nor repeat pieces.
#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace towerps::kernels::cpu {
namespace {

TEST(ThreadPoolTest, CoversEveryIndexOnceWithValidThreadIds) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::atomic<bool> bad_thread{false};
      pool.ParallelFor(n, 1, [&](int t, int64_t b, int64_t e) {
        if (t < 0 || t >= threads) bad_thread = true;
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1) << threads << " threads, n=" << n;
      EXPECT_FALSE(bad_thread);
    }
  }
}

TEST(ThreadPoolTest, ManyBackToBackJobs) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 5000; ++job) {
    pool.ParallelFor(64, 1, [&](int, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) sum += i;
    });
  }
  EXPECT_EQ(sum.load(), int64_t{5000} * (63 * 64 / 2));
}

TEST(ThreadPoolTest, GrainLimitsThePieces) {
  ThreadPool pool(4);
  std::atomic<int> pieces{0};
  pool.ParallelFor(100, 60, [&](int, int64_t, int64_t) { pieces++; });
  EXPECT_EQ(pieces.load(), 1);  // 100 / 60 < 2 pieces of at least 60
  pieces = 0;
  pool.ParallelFor(1000, 1, [&](int, int64_t, int64_t) { pieces++; });
  EXPECT_EQ(pieces.load(), 4 * ThreadPool::kPiecesPerThread);
}

}  // namespace
}  // namespace towerps::kernels::cpu
