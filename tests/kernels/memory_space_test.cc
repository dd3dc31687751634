// HostMemorySpace and BackendBuffer: alignment, copies, ownership. The same API on the CUDA
// backend is exercised by tests/kernels/backend_conformance_test.cc.
#include "kernels/memory_space.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/backend_buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/reference/reference_backend.h"

namespace towerps::kernels {
namespace {

TEST(HostMemorySpaceTest, AllocatesAlignedMemoryAndCopiesBothWays) {
  HostMemorySpace space;
  EXPECT_TRUE(space.host_memory());
  auto p = space.Allocate(1000);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*p) % 64, 0u);
  std::vector<float> in(250), out(250, -1.0f);
  std::iota(in.begin(), in.end(), 1.5f);
  space.CopyFromHost(in.data(), 1000, *p);
  auto q = space.Allocate(1000);
  ASSERT_TRUE(q.ok());
  space.Copy(*p, 1000, *q);
  space.CopyToHost(*q, 1000, out.data());
  EXPECT_EQ(out, in);
  space.Free(*p);
  space.Free(*q);
  space.Free(nullptr);
  auto zero = space.Allocate(0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, nullptr);
}

TEST(HostMemorySpaceTest, BackendsAreHostMemorySpaces) {
  auto cpu = CpuBackend::Create({});
  ASSERT_TRUE(cpu.ok());
  EXPECT_TRUE((*cpu)->host_memory());
  ReferenceBackend<double> ref;
  EXPECT_TRUE(ref.host_memory());
}

TEST(BackendBufferTest, OwnsMovesAndGrowsOnlyWhenTooSmall) {
  HostMemorySpace space;
  auto b = BackendBuffer<int32_t>::Allocate(&space, 10);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->size(), 10);
  EXPECT_EQ(b->bytes(), 40u);
  int32_t* first = b->data();
  ASSERT_TRUE(b->EnsureSize(&space, 8).ok());
  EXPECT_EQ(b->data(), first) << "a big enough buffer must not be reallocated";
  ASSERT_TRUE(b->EnsureSize(&space, 20).ok());
  EXPECT_EQ(b->size(), 20);
  BackendBuffer<int32_t> moved = std::move(*b);
  EXPECT_EQ(b->data(), nullptr);
  EXPECT_EQ(moved.size(), 20);
  moved.data()[19] = 7;
  moved.reset();
  EXPECT_EQ(moved.data(), nullptr);
  EXPECT_EQ(moved.size(), 0);
}

}  // namespace
}  // namespace towerps::kernels
