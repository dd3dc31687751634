// VariableListHash: equal lists agree, every declared property counts, and the value is pinned
// (checkpoints record it as the model signature: a change refuses every existing checkpoint).
#include "ps/variable.h"

#include <gtest/gtest.h>

namespace towerps::ps {
namespace {

std::vector<VariableSpec> Model() {
  return {{"fc1/kernel", {784, 100}}, {"fc1/bias", {100}}, {"labels", {10}, DType::kUInt8}};
}

TEST(VariableListHashTest, EqualListsAgree) {
  EXPECT_EQ(VariableListHash(Model()), VariableListHash(Model()));
}

TEST(VariableListHashTest, NameShapeDtypeAndOrderCount) {
  const uint64_t base = VariableListHash(Model());
  auto renamed = Model();
  renamed[1].name = "fc1/biases";
  auto reshaped = Model();
  reshaped[0].shape = {100, 784};
  auto retyped = Model();
  retyped[2].dtype = DType::kFloat32;
  auto reordered = Model();
  std::swap(reordered[0], reordered[1]);
  auto shorter = Model();
  shorter.pop_back();
  for (const auto& other : {renamed, reshaped, retyped, reordered, shorter}) {
    EXPECT_NE(VariableListHash(other), base);
  }
  // Lengths are hashed too, so moving a byte between a name and a shape changes the hash.
  EXPECT_NE(VariableListHash({{"a", {}}, {"b", {}}}), VariableListHash({{"ab", {}}}));
}

TEST(VariableListHashTest, ValueIsPinned) {
  EXPECT_EQ(VariableListHash({}), 0xa8c7f832281a39c5u);
  EXPECT_EQ(VariableListHash(Model()), 0x499c74d255f77895u);
}

}  // namespace
}  // namespace towerps::ps
