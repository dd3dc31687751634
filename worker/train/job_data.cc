#include "worker/train/job_data.h"

#include "worker/data/cifar10_reader.h"
#include "worker/data/fashion_mnist.h"
#include "worker/data/synthetic.h"
#include "worker/model/zoo.h"
#include "worker/train/local_training.h"

namespace towerps::worker {

std::vector<std::string> JobDatasetNames() { return {"fashion-mnist", "cifar10", "synthetic"}; }

namespace {

// A model taking the TensorFlow tutorial's 24x24 crops: CIFAR-10's 32x32 images (real or
// synthetic) are cropped for it.
bool TakesTutorialCrops(const Shape& input_shape) {
  return input_shape.size() == 3 && input_shape[1] == 24 && input_shape[2] == 24;
}

std::string ShapeText(const Shape& shape) {
  std::string out;
  for (int64_t d : shape) out += (out.empty() ? "" : "x") + std::to_string(d);
  return out;
}

// The example shape of a dataset (before any crop), or empty for one that takes the model's.
Result<Shape> DatasetExampleShape(const std::string& dataset) {
  if (dataset == "fashion-mnist") return Shape{1, 28, 28};
  if (dataset == "cifar10") return Shape{3, 32, 32};
  if (dataset == "synthetic") return Shape{};
  std::string names;
  for (const std::string& n : JobDatasetNames()) names += (names.empty() ? "" : ", ") + n;
  return NotFoundError("--dataset " + dataset + " is not one of " + names);
}

// Whether examples of `example` shape feed a model taking `input`: the same shape, or CIFAR's
// 32x32 cropped to the tutorial's 24x24 (LoadJobData's crops); synthetic data fits anything.
bool Fits(const Shape& example, const Shape& input) {
  if (example.empty() || example == input) return true;
  return example == Shape{3, 32, 32} && TakesTutorialCrops(input) && input[0] == 3;
}

}  // namespace

Status CheckDatasetFitsModel(const std::string& dataset, const std::string& model) {
  TOWERPS_ASSIGN_OR_RETURN(const Shape example, DatasetExampleShape(dataset));
  TOWERPS_ASSIGN_OR_RETURN(const ModelBuilder builder, ZooModel(model));
  if (Fits(example, builder.input_shape())) return Status::Ok();
  std::vector<std::string> fitting;
  for (const std::string& name : ZooModelNames()) {
    if (Fits(example, ZooModel(name)->input_shape())) fitting.push_back(name);
  }
  std::string choose;
  for (size_t i = 0; i < fitting.size(); ++i) {
    choose += (i == 0 ? "" : i + 1 == fitting.size() ? " or " : ", ") + fitting[i];
  }
  return InvalidArgumentError(
      "model " + model + " expects " + ShapeText(builder.input_shape()) + " inputs, but " +
      dataset + " examples are " + ShapeText(example) + " (" +
      (fitting.empty() ? "choose" : "choose --model " + choose + ", or") + " another --dataset)");
}

Result<JobData> LoadJobData(const std::string& dataset, const std::string& data_dir,
                            const Shape& input_shape, int batch_size, uint64_t seed) {
  JobData d;
  BatcherOptions base;
  base.batch_size = batch_size;
  base.seed = seed;
  const bool crops = TakesTutorialCrops(input_shape);
  if (dataset == "fashion-mnist") {
    FashionMnistOptions fo;
    if (!data_dir.empty()) fo.data_dir = data_dir;
    TOWERPS_ASSIGN_OR_RETURN(d.train, LoadFashionMnist(fo));
    fo.split = Split::kTest;
    TOWERPS_ASSIGN_OR_RETURN(d.test, LoadFashionMnist(fo));
    base.mean = {kFashionMnistMean};
    base.stddev = {kFashionMnistStddev};
  } else if (dataset == "cifar10") {
    if (data_dir.empty()) {
      return InvalidArgumentError(
          "--dataset cifar10 needs --data-dir with data_batch_*.bin and "
          "test_batch.bin");
    }
    TOWERPS_ASSIGN_OR_RETURN(d.train, LoadCifar10(data_dir, Split::kTrain));
    TOWERPS_ASSIGN_OR_RETURN(d.test, LoadCifar10(data_dir, Split::kTest));
    base.mean = {0.4914f, 0.4822f, 0.4465f};
    base.stddev = {0.2470f, 0.2435f, 0.2616f};
  } else if (dataset == "synthetic") {
    SyntheticOptions so;
    so.example_shape = crops ? Shape{input_shape[0], 32, 32} : input_shape;
    so.size = 10000;
    so.seed = seed;
    TOWERPS_ASSIGN_OR_RETURN(d.train, MakeSyntheticDataset(so));
    so.size = 2000;
    so.seed = seed + 1;
    TOWERPS_ASSIGN_OR_RETURN(d.test, MakeSyntheticDataset(so));
    base.mean = {0.5f};
    base.stddev = {0.25f};
  } else {
    std::string names;
    for (const std::string& n : JobDatasetNames()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgumentError("--dataset " + dataset + " is not one of " + names);
  }
  if (crops) base.crop_h = base.crop_w = 24;
  d.train_options = base;
  d.train_options.random_crop_flip = crops;
  d.test_options = base;
  d.test_options.shuffle = false;
  d.test_options.drop_remainder = false;
  return d;
}

}  // namespace towerps::worker
