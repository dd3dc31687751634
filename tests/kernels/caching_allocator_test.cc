// CachingAllocator bookkeeping against a fake device (an arena of host addresses that is never
// dereferenced): reuse, best fit, split and merge, growth under the cap, peak, and the text of
// the out-of-memory errors. No GPU needed.
#include "kernels/cuda/caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "tests/testing/status_assert.h"

namespace towerps::kernels::cuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Hands out fake aligned addresses; records every call.
struct FakeDevice {
  size_t total = 100 * kMiB;
  size_t used = 0;
  uintptr_t next = uintptr_t{1} << 40;
  int allocations = 0;
  std::vector<uintptr_t> freed;
  bool refuse = false;

  RawDeviceMemory Raw() {
    RawDeviceMemory raw;
    raw.total_bytes = total;
    raw.allocate = [this](size_t bytes) -> Result<void*> {
      if (refuse || used + bytes > total) return ResourceExhaustedError("cudaMalloc failed");
      ++allocations;
      used += bytes;
      const uintptr_t p = next;
      next += (bytes + 4095) / 4096 * 4096 + 4096;  // segments are never adjacent
      return reinterpret_cast<void*>(p);
    };
    raw.free = [this](void* p) { freed.push_back(reinterpret_cast<uintptr_t>(p)); };
    raw.free_bytes = [this] { return total - used; };
    return raw;
  }
};

CachingAllocatorOptions Fraction(double f, bool growth) {
  CachingAllocatorOptions o;
  o.memory_fraction = f;
  o.allow_growth = growth;
  o.growth_chunk_bytes = 4 * kMiB;
  o.device_name = "gpu:0";
  return o;
}

uintptr_t Addr(void* p) { return reinterpret_cast<uintptr_t>(p); }

TEST(CachingAllocatorTest, ReservesTheFractionAtStartAndReusesFreedBlocks) {
  FakeDevice dev;
  auto a = CachingAllocator::Create(Fraction(0.5, false), dev.Raw());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(dev.allocations, 1);
  EXPECT_EQ(dev.used, 50 * kMiB);
  EXPECT_EQ((*a)->stats().limit_bytes, 50 * kMiB);

  ASSERT_OK_AND_ASSIGN(void* p, (*a)->Allocate(1000));
  EXPECT_EQ(Addr(p) % CachingAllocator::kAlignment, 0u);
  EXPECT_EQ((*a)->stats().bytes_in_use, 1024u) << "rounded up to 256 bytes";
  (*a)->Free(p);
  ASSERT_OK_AND_ASSIGN(void* q, (*a)->Allocate(900));
  EXPECT_EQ(q, p) << "a freed block is handed out again";
  (*a)->Free(q);
  for (int i = 0; i < 100; ++i) {
    ASSERT_OK_AND_ASSIGN(void* block, (*a)->Allocate(size_t(1 + i) * 4096));
    (*a)->Free(block);
  }
  EXPECT_EQ(dev.allocations, 1) << "no device allocation after the reservation";
  EXPECT_EQ((*a)->stats().bytes_in_use, 0u);
}

TEST(CachingAllocatorTest, SplitsAndMergesNeighbours) {
  FakeDevice dev;
  ASSERT_OK_AND_ASSIGN(auto a, CachingAllocator::Create(Fraction(0.1, false), dev.Raw()));
  const size_t limit = a->stats().limit_bytes;
  ASSERT_OK_AND_ASSIGN(void* x, a->Allocate(kMiB));
  ASSERT_OK_AND_ASSIGN(void* y, a->Allocate(kMiB));
  ASSERT_OK_AND_ASSIGN(void* z, a->Allocate(kMiB));
  EXPECT_EQ(Addr(y), Addr(x) + kMiB) << "split from the front of one segment";
  EXPECT_EQ(Addr(z), Addr(y) + kMiB);
  // Freeing x and z leaves two holes; y's release merges all three with the tail, so the whole
  // reservation is one block again and a request for all of it succeeds.
  a->Free(x);
  a->Free(z);
  EXPECT_FALSE(a->Allocate(limit).ok()) << "fragmented: no single block of the whole limit";
  a->Free(y);
  auto all = a->Allocate(limit);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, x);
  a->Free(*all);
}

TEST(CachingAllocatorTest, BestFitPicksTheSmallestFreeBlockThatFits) {
  FakeDevice dev;
  ASSERT_OK_AND_ASSIGN(auto a, CachingAllocator::Create(Fraction(0.1, false), dev.Raw()));
  ASSERT_OK_AND_ASSIGN(void* big, a->Allocate(3 * kMiB));
  ASSERT_OK_AND_ASSIGN(void* sep1, a->Allocate(4096));
  ASSERT_OK_AND_ASSIGN(void* small, a->Allocate(kMiB));
  ASSERT_OK_AND_ASSIGN(void* sep2, a->Allocate(4096));
  a->Free(big);
  a->Free(small);
  ASSERT_OK_AND_ASSIGN(void* best, a->Allocate(kMiB - 4096));
  EXPECT_EQ(best, small) << "the 1 MiB hole fits best";
  ASSERT_OK_AND_ASSIGN(void* next, a->Allocate(2 * kMiB));
  EXPECT_EQ(next, big) << "then the 3 MiB hole, split";
  (void)sep1;
  (void)sep2;
}

TEST(CachingAllocatorTest, TracksPeakAndCurrentBytes) {
  FakeDevice dev;
  ASSERT_OK_AND_ASSIGN(auto a, CachingAllocator::Create(Fraction(0.1, false), dev.Raw()));
  ASSERT_OK_AND_ASSIGN(void* p, a->Allocate(2 * kMiB));
  ASSERT_OK_AND_ASSIGN(void* q, a->Allocate(3 * kMiB));
  a->Free(p);
  ASSERT_OK_AND_ASSIGN(void* r, a->Allocate(kMiB));
  const AllocatorStats s = a->stats();
  EXPECT_EQ(s.bytes_in_use, 4 * kMiB);
  EXPECT_EQ(s.peak_bytes_in_use, 5 * kMiB);
  EXPECT_EQ(s.num_allocs, 3);
  a->Free(q);
  a->Free(r);
  EXPECT_EQ(a->stats().bytes_in_use, 0u);
  EXPECT_EQ(a->stats().peak_bytes_in_use, 5 * kMiB);
}

TEST(CachingAllocatorTest, GrowsInChunksUpToTheCapAndNeverAbove) {
  FakeDevice dev;
  ASSERT_OK_AND_ASSIGN(auto a, CachingAllocator::Create(Fraction(0.1, true), dev.Raw()));
  EXPECT_EQ(dev.allocations, 0) << "allow_growth starts with nothing";
  ASSERT_OK_AND_ASSIGN(void* p, a->Allocate(kMiB));
  EXPECT_EQ(dev.allocations, 1);
  EXPECT_EQ(a->stats().bytes_reserved, 4 * kMiB) << "one growth chunk";
  ASSERT_OK_AND_ASSIGN(void* q, a->Allocate(2 * kMiB));
  EXPECT_EQ(dev.allocations, 1) << "served from the first chunk";
  ASSERT_OK_AND_ASSIGN(void* big, a->Allocate(5 * kMiB));
  EXPECT_EQ(dev.allocations, 2);
  EXPECT_EQ(a->stats().bytes_reserved, 9 * kMiB) << "a segment as large as the request";
  a->Free(p);
  a->Free(q);
  a->Free(big);
  EXPECT_TRUE(dev.freed.empty()) << "memory is never returned while the allocator lives";
  const size_t limit = a->stats().limit_bytes;  // 10 MiB
  // 9 MiB reserved, so only 1 MiB more may be taken.
  auto too_big = a->Allocate(6 * kMiB);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
  // From a freed segment: no device call.
  ASSERT_OK_AND_ASSIGN(void* last, a->Allocate(kMiB + kMiB / 2));
  EXPECT_EQ(dev.allocations, 2);
  EXPECT_LE(a->stats().bytes_reserved, limit);
  a->Free(last);
}

TEST(CachingAllocatorTest, OutOfMemoryNamesFractionRequestAndFreeMemory) {
  FakeDevice dev;
  ASSERT_OK_AND_ASSIGN(auto a, CachingAllocator::Create(Fraction(0.25, false), dev.Raw()));
  auto r = a->Allocate(30 * kMiB);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
  const std::string msg = r.status().message();
  EXPECT_NE(msg.find("gpu:0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--gpu-memory-fraction=0.25"), std::string::npos) << msg;
  EXPECT_NE(msg.find("requested 31457280 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("reports 78643200 bytes (75.0 MiB) free"), std::string::npos) << msg;
  EXPECT_NE(msg.find("raise --gpu-memory-fraction"), std::string::npos) << msg;
}

TEST(CachingAllocatorTest, TwoAtPointFourFitAndAThirdFailsAtStart) {
  FakeDevice dev;
  auto w1 = CachingAllocator::Create(Fraction(0.4, false), dev.Raw());
  auto w2 = CachingAllocator::Create(Fraction(0.4, false), dev.Raw());
  ASSERT_OK(w1);
  ASSERT_OK(w2);
  auto w3 = CachingAllocator::Create(Fraction(0.4, false), dev.Raw());
  ASSERT_FALSE(w3.ok());
  EXPECT_EQ(w3.status().code(), StatusCode::kResourceExhausted);
  const std::string msg = w3.status().message();
  EXPECT_NE(msg.find("--gpu-memory-fraction=0.4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cudaMalloc failed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("20971520 bytes (20.0 MiB) free"), std::string::npos) << msg;
  // The fraction is not used up: the other workers hold the device, so raising it cannot help.
  EXPECT_NE(msg.find("Other processes hold the rest: lower --gpu-memory-fraction"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("raise --gpu-memory-fraction"), std::string::npos) << msg;
}

TEST(CachingAllocatorTest, UnsetFractionTakesTheFreeMemoryLessTheReserve) {
  FakeDevice dev;
  dev.used = 30 * kMiB;  // another process
  CachingAllocatorOptions o = Fraction(0.0, false);
  o.unset_reserve_bytes = 10 * kMiB;
  auto a = CachingAllocator::Create(o, dev.Raw());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ((*a)->stats().limit_bytes, 60 * kMiB);
  EXPECT_EQ(dev.used, 90 * kMiB);
  auto r = (*a)->Allocate(61 * kMiB);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--gpu-memory-fraction=unset"), std::string::npos)
      << r.status().message();
}

TEST(CachingAllocatorTest, ReturnsEverySegmentOnDestruction) {
  FakeDevice dev;
  {
    ASSERT_OK_AND_ASSIGN(auto a, CachingAllocator::Create(Fraction(0.5, true), dev.Raw()));
    ASSERT_OK(a->Allocate(kMiB));
    ASSERT_OK(a->Allocate(10 * kMiB));
  }
  EXPECT_EQ(dev.freed.size(), 2u);
}

TEST(CachingAllocatorTest, RejectsABadFraction) {
  FakeDevice dev;
  for (double f : {-0.5, 1.5, 1.0001}) {
    auto a = CachingAllocator::Create(Fraction(f, false), dev.Raw());
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find("--gpu-memory-fraction="), std::string::npos);
  }
  EXPECT_EQ(dev.allocations, 0);
}

TEST(CachingAllocatorDeathTest, FreeOfAForeignPointerIsABug) {
  FakeDevice dev;
  ASSERT_OK_AND_ASSIGN(auto a, CachingAllocator::Create(Fraction(0.1, false), dev.Raw()));
  int x = 0;
  EXPECT_DEATH(a->Free(&x), "did not hand out");
}

}  // namespace
}  // namespace towerps::kernels::cuda
