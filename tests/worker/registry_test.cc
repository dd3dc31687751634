// Registry: registration errors, lookups, and the fit check for a user's own model and dataset.
#include "towerps/registry.h"

#include <gtest/gtest.h>

#include "tests/testing/status_assert.h"

namespace towerps {
namespace {

ModelDef Tiny(Shape input, int classes) {
  return {.summary = "tiny", .build = [input, classes] {
            ModelBuilder b(input);
            b.Dense("logits", classes);
            return b;
          }};
}

DatasetDef Fixed(Shape shape, int classes) {
  return {.summary = "fixed",
          .load = [](const DataRequest&) -> Result<DataSplits> {
            return InternalError("not loaded in this test");
          },
          .probe = [shape, classes](const DataRequest&) -> Result<DatasetInfo> {
            return DatasetInfo{.example_shape = shape, .num_classes = classes};
          }};
}

TEST(RegistryTest, RejectsBadRegistrationsAndChangesNothing) {
  Registry r;
  EXPECT_OK(r.AddModel("tiny", Tiny({4}, 3)));
  EXPECT_EQ(r.AddModel("tiny", Tiny({4}, 3)).message(), "model 'tiny' is registered twice");
  EXPECT_FALSE(r.AddModel("", Tiny({4}, 3)).ok());
  EXPECT_FALSE(r.AddModel("a b", Tiny({4}, 3)).ok());
  EXPECT_EQ(r.AddModel("empty", {}).message(), "model 'empty' has no build function");
  EXPECT_EQ(r.AddDataset("d", {}).message(), "dataset 'd' has no load function");
  EXPECT_EQ(r.ModelNames(), std::vector<std::string>{"tiny"});
  EXPECT_TRUE(r.DatasetNames().empty());
}

TEST(RegistryTest, ChecksShapesAndClassesOfUserEntries) {
  Registry r;
  ASSERT_OK(r.AddModel("vec4", Tiny({4}, 3)));
  ASSERT_OK(r.AddModel("img", Tiny({1, 2, 2}, 3)));
  ASSERT_OK(r.AddDataset("four", Fixed({4}, 3)));
  ASSERT_OK(r.AddDataset("many", Fixed({4}, 5)));
  EXPECT_OK(r.CheckFits("vec4", "four", {}));
  EXPECT_EQ(r.CheckFits("img", "four", {}).message(),
            "model img expects 1x2x2 inputs, but four examples are 4 (choose --model vec4, or "
            "another --dataset)");
  EXPECT_EQ(r.CheckFits("vec4", "many", {}).message(),
            "model vec4 has 3 outputs, but many has 5 classes (give the model's last Dense layer "
            "at least 5 units)");
  EXPECT_EQ(r.CheckFits("nope", "four", {}).message(), "unknown model 'nope' (known: vec4, img)");
  ASSERT_OK_AND_ASSIGN(const ModelBuilder b, r.DescribeModel("img"));
  EXPECT_EQ(b.output_units(), 3);
}

TEST(RegistryTest, StockRegistryHasTheZooAndTheStockDatasets) {
  const Registry r = StockRegistry();
  EXPECT_EQ(r.ModelNames(),
            (std::vector<std::string>{"mlp", "cnn", "cifar10", "resnet20", "embed-mlp", "bag-mlp",
                                      "ctr_mlp", "dlrm_small", "wide_deep", "regression_mlp"}));
  EXPECT_EQ(r.DatasetNames(),
            (std::vector<std::string>{"fashion-mnist", "idx", "cifar10", "npy", "criteo",
                                      "categorical", "regression", "synthetic"}));
}

}  // namespace
}  // namespace towerps
