#include "common/tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

namespace towerps {
namespace {

TEST(TensorTest, EmptyIsAlignedAndSized) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::Empty({n, 3});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kTensorAlignment, 0u);
    EXPECT_EQ(t.num_elements(), n * 3);
    EXPECT_EQ(t.byte_size(), static_cast<size_t>(n * 3 * 4));
  }
}

// Every alignment Empty takes, for sizes around glibc's bins and its mmap threshold: the start is
// aligned and the whole padded block is writable (ASan's pass checks the bounds).
TEST(TensorTest, EmptyTakesEveryAlignment) {
  for (size_t alignment : {kTensorAlignment, size_t{128}, size_t{4096}}) {
    for (int64_t n : {0, 1, 15, 16, 257, 1031, 4096, 300000}) {
      Tensor t = Tensor::Empty({n}, DType::kUInt8, alignment);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % alignment, 0u) << alignment << " " << n;
      const size_t padded = (static_cast<size_t>(n) + alignment - 1) / alignment * alignment;
      std::fill_n(static_cast<uint8_t*>(t.raw_data()), padded, uint8_t{7});
      EXPECT_EQ(t.byte_size(), static_cast<size_t>(n));
    }
  }
}

TEST(TensorTest, ZerosAreZero) {
  Tensor t = Tensor::Zeros({5, 7});
  for (int64_t i = 0; i < t.num_elements(); ++i) EXPECT_EQ(t.f32()[i], 0.0f);
}

TEST(TensorTest, ViewsShareStorageWithoutCopying) {
  Tensor t = Tensor::Empty({4, 3});
  for (int i = 0; i < 12; ++i) t.f32()[i] = static_cast<float>(i);
  Tensor rows = t.Slice(1, 3);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  EXPECT_EQ(rows.f32(), t.f32() + 3);
  EXPECT_TRUE(rows.SharesStorageWith(t));
  rows.f32()[0] = 100.0f;
  EXPECT_EQ(t.f32()[3], 100.0f);

  Tensor flat = t.Reshape({12});
  EXPECT_EQ(flat.f32(), t.f32());
  Tensor mid = t.View(5, {2, 2});
  EXPECT_EQ(mid.f32()[0], 5.0f);
}

TEST(TensorTest, CloneIsDeep) {
  Tensor t = Tensor::Empty({8});
  std::mt19937 rng(1);
  for (int i = 0; i < 8; ++i) t.f32()[i] = std::uniform_real_distribution<float>(-1, 1)(rng);
  Tensor c = t.Clone();
  EXPECT_FALSE(c.SharesStorageWith(t));
  EXPECT_NE(c.f32(), t.f32());
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c.f32()[i], t.f32()[i]);
  c.f32()[0] += 1.0f;
  EXPECT_NE(c.f32()[0], t.f32()[0]);
}

TEST(TensorTest, StorageOutlivesOriginalHandle) {
  Tensor view;
  {
    Tensor t = Tensor::Empty({16});
    for (int i = 0; i < 16; ++i) t.f32()[i] = static_cast<float>(i * i);
    view = t.Slice(4, 8);
  }
  EXPECT_EQ(view.f32()[0], 16.0f);
  EXPECT_EQ(view.f32()[3], 49.0f);
}

TEST(TensorTest, WrapExternalKeepsOwnerAlive) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  std::weak_ptr<std::vector<float>> weak = owner;
  Tensor t = Tensor::WrapExternal(owner->data(), {2, 2}, DType::kFloat32, owner);
  owner.reset();
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(t.f32()[3], 4.0f);
  t = Tensor();
  EXPECT_TRUE(weak.expired());
}

TEST(TensorTest, CheckedNumElementsRejectsOverflowAndNegative) {
  EXPECT_EQ(*CheckedNumElements({}), 1);
  EXPECT_EQ(*CheckedNumElements({2, 0, 5}), 0);
  EXPECT_FALSE(CheckedNumElements({-1, 4}).ok());
  EXPECT_FALSE(CheckedNumElements({int64_t{1} << 40, int64_t{1} << 40}).ok());
}

TEST(TensorDeathTest, OutOfRangeViewAborts) {
  Tensor t = Tensor::Empty({4});
  EXPECT_DEATH((void)t.View(2, {3}), "exceeds storage");
  EXPECT_DEATH((void)t.Slice(3, 5), "slice");
}

TEST(TensorDeathTest, WrongDtypeAccessAborts) {
  Tensor t = Tensor::Empty({4}, DType::kUInt8);
  EXPECT_DEATH((void)t.f32(), "dtype is uint8");
}

}  // namespace
}  // namespace towerps
