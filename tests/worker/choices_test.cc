// --list-choices: every name it lists is one its option's parser accepts, and the lists are
// complete where the parser can say so.
#include "worker/choices.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "job/job_config.h"
#include "tests/testing/status_assert.h"
#include "towerps/registry.h"
#include "worker/model/zoo.h"

namespace towerps::worker {
namespace {

using nlohmann::json;

std::vector<std::string> List(const json& choices, const std::string& key) {
  EXPECT_TRUE(choices.contains(key)) << key;
  return choices.value(key, std::vector<std::string>{});
}

TEST(ChoicesTest, EveryListedNameParsesBack) {
  const json choices = json::parse(ChoicesJson(StockRegistry()));
  const std::vector<std::string> modes = List(choices, "modes");
  EXPECT_EQ(modes, (std::vector<std::string>{"sync", "async", "ssp", "softsync"}));
  for (const std::string& m : modes) {
    Result<ps::UpdateMode> r = ps::kUpdateModes.Parse(m);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(ps::kUpdateModes.Name(*r), m);
  }
  // The click models' recommended settings, and none for the others.
  ASSERT_TRUE(choices["recommended"].is_object());
  EXPECT_EQ(choices["recommended"]["dlrm_small"]["optimizer"], "adam");
  EXPECT_EQ(choices["recommended"]["wide_deep"]["table-optimizer"], "adagrad");
  EXPECT_FALSE(choices["recommended"].contains("mlp"));
  const std::vector<std::string> optimizers = List(choices, "optimizers");
  EXPECT_EQ(optimizers.size(), 4u);
  for (const std::string& o : optimizers) {
    Result<ps::OptimizerKind> r = ps::kOptimizerKinds.Parse(o);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(ps::kOptimizerKinds.Name(*r), o);
  }
  const std::vector<std::string> schedules = List(choices, "lr_schedules");
  EXPECT_EQ(schedules.size(), 3u);
  for (const std::string& s : schedules) {
    Result<ps::LrScheduleKind> r = ps::kLrScheduleKinds.Parse(s);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(ps::kLrScheduleKinds.Name(*r), s);
  }
  EXPECT_EQ(List(choices, "models"), worker::ZooModelNames());
  for (const std::string& m : worker::ZooModelNames()) {
    Result<ModelBuilder> r = StockRegistry().DescribeModel(m);
    EXPECT_TRUE(r.ok()) << r.status();
  }
  EXPECT_EQ(List(choices, "datasets"), StockRegistry().DatasetNames());
}

// The fit check the launcher asks the worker binary for (--check-job).
TEST(ChoicesTest, ModelsAndDatasetsAreMatchedByShape) {
  const Registry r = StockRegistry();
  // cifar10's shapes are known from the name; the probe only checks that the files are there.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("towerps_choices_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}) {
    std::ofstream(dir / name) << "";
  }
  DataRequest cifar;
  cifar.data_dir = dir.string();
  Status s;
  EXPECT_OK(r.CheckFits("mlp", "fashion-mnist", {}));
  EXPECT_OK(r.CheckFits("cifar10", "cifar10", cifar));  // 32x32 cropped to 24x24
  EXPECT_OK(r.CheckFits("resnet20", "cifar10", cifar));
  for (const std::string& model : worker::ZooModelNames()) {
    if (worker::ZooModel(model)->categorical_fields() > 0) continue;  // categorical ids: below
    if (worker::ZooModel(model)->num_classes() == 0) continue;        // regression: below
    EXPECT_OK(r.CheckFits(model, "synthetic", {}));                   // made in the model's shape
  }
  // Float targets and class labels do not mix, either way.
  EXPECT_OK(r.CheckFits("regression_mlp", "regression", {}));
  s = r.CheckFits("regression_mlp", "synthetic", {});
  EXPECT_NE(s.message().find("model regression_mlp predicts float targets (the squared error), "
                             "but synthetic has class labels"),
            std::string::npos)
      << s.message();
  Registry with_classifier = StockRegistry();
  ASSERT_OK(with_classifier.AddModel("clf16", {.summary = "", .build = [] {
                                                 ModelBuilder b({16});
                                                 b.Dense("logits", 3);
                                                 return b;
                                               }}));
  s = with_classifier.CheckFits("clf16", "regression", {});
  EXPECT_NE(s.message().find("model clf16 predicts classes, but regression has float targets"),
            std::string::npos)
      << s.message();
  EXPECT_OK(r.CheckFits("embed-mlp", "categorical", {}));  // as many fields as the model's
  EXPECT_OK(r.CheckFits("bag-mlp", "categorical", {}));    // multi-hot fields too
  s = r.CheckFits("bag-mlp", "synthetic", {});
  EXPECT_NE(s.message().find("expects 4 dense features, 8 categorical ids and 1 multi-hot "
                             "field per example, but synthetic examples hold 4 dense features"),
            std::string::npos)
      << s.message();
  s = r.CheckFits("embed-mlp", "synthetic", {});
  EXPECT_NE(s.message().find("expects 4 dense features and 8 categorical ids per example, but "
                             "synthetic examples hold 4 dense features (choose --model mlp, cnn"),
            std::string::npos)
      << s.message();
  // A model's inputs and the dataset's are named both ways, with the models that fit.
  DataRequest criteo;  // the probe only checks that the files are there
  criteo.data_dir = dir.string();
  std::ofstream(dir / "train.txt") << "";
  std::ofstream(dir / "test.txt") << "";
  s = r.CheckFits("ctr_mlp", "fashion-mnist", {});
  EXPECT_NE(s.message().find("model ctr_mlp expects 13 dense features and 26 categorical ids per "
                             "example, but fashion-mnist examples hold 1x28x28 (choose --model "
                             "mlp or cnn, or another --dataset)"),
            std::string::npos)
      << s.message();
  s = r.CheckFits("mlp", "criteo", criteo);
  EXPECT_NE(s.message().find("criteo examples hold 13 dense features and 26 categorical ids "
                             "(choose --model ctr_mlp, dlrm_small or wide_deep, or another "
                             "--dataset)"),
            std::string::npos)
      << s.message();
  EXPECT_OK(r.CheckFits("ctr_mlp", "criteo", criteo));
  EXPECT_NE(r.CheckFits("mlp", "categorical", {}).message().find("for models with embedding"),
            std::string::npos);
  s = r.CheckFits("mlp", "cifar10", cifar);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "model mlp expects 1x28x28 inputs, but cifar10 examples are 3x32x32 (choose --model "
            "cifar10 or resnet20, or another --dataset)");
  s = r.CheckFits("resnet20", "fashion-mnist", {});
  EXPECT_NE(s.message().find("choose --model mlp or cnn"), std::string::npos) << s.message();
  EXPECT_EQ(r.CheckFits("nope", "fashion-mnist", {}).code(), StatusCode::kNotFound);
  EXPECT_EQ(r.CheckFits("mlp", "nope", {}).code(), StatusCode::kNotFound);
  EXPECT_EQ(r.CheckFits("resnet20", "cifar10", {}).message(),
            "--dataset cifar10 needs --data-dir with data_batch_*.bin and test_batch.bin");
  EXPECT_EQ(r.CheckFits("mlp", "nope", {}).message(),
            "unknown dataset 'nope' (known: fashion-mnist, idx, cifar10, npy, criteo, categorical, "
            "regression, synthetic)");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace towerps::worker
