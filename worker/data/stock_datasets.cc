// The stock datasets of AddStockDatasets (<towerps/registry.h>): fashion-mnist, idx, cifar10,
// npy, criteo, categorical and synthetic.
#include <algorithm>
#include <cstring>
#include <fstream>

#include "common/finite.h"
#include "common/logging.h"
#include "towerps/registry.h"
#include "worker/data/categorical.h"
#include "worker/data/cifar10_reader.h"
#include "worker/data/criteo_reader.h"
#include "worker/data/data_files.h"
#include "worker/data/fashion_mnist.h"
#include "worker/data/idx_reader.h"
#include "worker/data/npy_dataset.h"
#include "worker/data/regression.h"
#include "worker/data/synthetic.h"

namespace towerps {
namespace {

using worker::Split;

// The TensorFlow CIFAR-10 tutorial's models take 24x24 crops of the 32x32 images.
bool TakesTutorialCrops(const Shape& input) {
  return input.size() == 3 && input[1] == 24 && input[2] == 24;
}

using worker::ClassCount;
using worker::Resolve;

// ---- fashion-mnist and idx -------------------------------------------------------------------

// The IDX files of a request: the named ones, else MNIST's names (".gz" or plain) in data_dir.
struct IdxFiles {
  std::string train_images, train_labels, test_images, test_labels;
};

Result<std::string> DefaultIdxFile(const std::string& dir, const std::string& explicit_name,
                                   const std::string& base) {
  if (!explicit_name.empty()) return Resolve(dir, explicit_name);
  if (dir.empty()) {
    return InvalidArgumentError(
        "--dataset idx needs --data-dir, or --train-images, "
        "--train-labels, --test-images and --test-labels");
  }
  return worker::FindIdxFile(dir, base,
                             "name the files with --train-images, --train-labels, "
                             "--test-images and --test-labels");
}

Result<IdxFiles> FindIdxFiles(const DataRequest& r) {
  IdxFiles f;
  TOWERPS_ASSIGN_OR_RETURN(f.train_images,
                           DefaultIdxFile(r.data_dir, r.train_images, "train-images-idx3-ubyte"));
  TOWERPS_ASSIGN_OR_RETURN(f.train_labels,
                           DefaultIdxFile(r.data_dir, r.train_labels, "train-labels-idx1-ubyte"));
  TOWERPS_ASSIGN_OR_RETURN(f.test_images,
                           DefaultIdxFile(r.data_dir, r.test_images, "t10k-images-idx3-ubyte"));
  TOWERPS_ASSIGN_OR_RETURN(f.test_labels,
                           DefaultIdxFile(r.data_dir, r.test_labels, "t10k-labels-idx1-ubyte"));
  return f;
}

Result<DataSplits> LoadIdx(const DataRequest& r) {
  TOWERPS_ASSIGN_OR_RETURN(const IdxFiles f, FindIdxFiles(r));
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train,
                           worker::LoadIdxImagesAndLabels(f.train_images, f.train_labels, 256));
  TOWERPS_ASSIGN_OR_RETURN(d.test,
                           worker::LoadIdxImagesAndLabels(f.test_images, f.test_labels, 256));
  if (d.train.example_shape != d.test.example_shape) {
    return InvalidArgumentError(f.train_images + " holds " + ShapeToString(d.train.example_shape) +
                                " images but " + f.test_images + " holds " +
                                ShapeToString(d.test.example_shape));
  }
  d.train.num_classes = d.test.num_classes = ClassCount(d);
  return d;  // normalization: from the training set
}

Result<DatasetInfo> ProbeIdx(const DataRequest& r) {
  TOWERPS_ASSIGN_OR_RETURN(const IdxFiles f, FindIdxFiles(r));
  TOWERPS_ASSIGN_OR_RETURN(const worker::IdxArray h,
                           worker::ReadIdxFile(f.train_images, /*header_only=*/true));
  if (h.dims.size() != 3) {
    return CorruptionError(f.train_images + ": images must have 3 dimensions [n, h, w], not " +
                           std::to_string(h.dims.size()));
  }
  return DatasetInfo{.example_shape = {1, h.dims[1], h.dims[2]}};
}

// The four files must be there (their contents are checked when they are loaded), so that
// towerps-launch can refuse a wrong --data-dir before it starts anything.
Result<DatasetInfo> ProbeFashionMnist(const DataRequest& r) {
  const std::string dir = r.data_dir.empty() ? worker::kDefaultFashionMnistDir : r.data_dir;
  for (const char* base : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}) {
    TOWERPS_RETURN_IF_ERROR(
        worker::FindIdxFile(dir, base,
                            "install the dataset-fashion-mnist package or pass --data-dir")
            .status());
  }
  return DatasetInfo{.example_shape = {1, 28, 28}, .num_classes = 10};
}

Result<DataSplits> LoadFashionMnist(const DataRequest& r) {
  worker::FashionMnistOptions fo;
  if (!r.data_dir.empty()) fo.data_dir = r.data_dir;
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train, worker::LoadFashionMnist(fo));
  fo.split = Split::kTest;
  TOWERPS_ASSIGN_OR_RETURN(d.test, worker::LoadFashionMnist(fo));
  d.preprocessing.mean = {worker::kFashionMnistMean};
  d.preprocessing.stddev = {worker::kFashionMnistStddev};
  return d;
}

// ---- cifar10 and synthetic ---------------------------------------------------------------------

Result<DataSplits> LoadCifar10(const DataRequest& r) {
  if (r.data_dir.empty()) {
    return InvalidArgumentError(
        "--dataset cifar10 needs --data-dir with data_batch_*.bin and test_batch.bin");
  }
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train, worker::LoadCifar10(r.data_dir, Split::kTrain));
  TOWERPS_ASSIGN_OR_RETURN(d.test, worker::LoadCifar10(r.data_dir, Split::kTest));
  d.preprocessing.mean = {0.4914f, 0.4822f, 0.4465f};
  d.preprocessing.stddev = {0.2470f, 0.2435f, 0.2616f};
  if (TakesTutorialCrops(r.model_input)) {
    d.preprocessing.crop_h = d.preprocessing.crop_w = 24;
    d.preprocessing.random_crop_flip = true;
  }
  return d;
}

Result<DatasetInfo> ProbeCifar10(const DataRequest& r) {
  if (r.data_dir.empty()) return LoadCifar10(r).status();  // names what --data-dir must hold
  for (const char* name : {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"}) {
    const std::string path = r.data_dir + "/" + name;
    if (!std::ifstream(path)) {
      return NotFoundError(path +
                           ": cannot open (--data-dir must hold data_batch_1.bin .. "
                           "data_batch_5.bin and test_batch.bin)");
    }
  }
  const bool crops = TakesTutorialCrops(r.model_input) && r.model_input[0] == 3;
  return DatasetInfo{.example_shape = crops ? Shape{3, 24, 24} : Shape{3, 32, 32},
                     .num_classes = 10};
}

// A generator's two splits: its own training size, 4000 test examples, seeded apart; their
// dense features are standard normal already.
template <typename Options, typename Make>
Result<DataSplits> GeneratedSplits(Options o, Make make, const std::string& name, uint64_t seed) {
  o.seed = seed;
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train, make(o));
  if constexpr (requires { o.stream_offset; }) {  // a stream that drifts: the test split is its end
    o.stream_size = o.size + 4000;
    o.stream_offset = o.size;
  }
  o.size = 4000;
  o.seed = seed + 1;
  TOWERPS_ASSIGN_OR_RETURN(d.test, make(o));
  d.train.name = name + "/train";
  d.test.name = name + "/test";
  d.preprocessing.mean = {0.0f};
  d.preprocessing.stddev = {1.0f};
  return d;
}

// 4 dense features beside the model's categorical fields, 1000 ids per field, 4 classes.
worker::CategoricalOptions CategoricalFor(const DataRequest& r) {
  worker::CategoricalOptions o;
  o.fields = r.model_fields;
  o.multi_hot = r.model_multi_hot;
  o.scores_seed = r.seed;
  o.drift = r.drift;
  o.stream_size = o.size + 4000;  // the training split, then the test split
  return o;
}

Result<DataSplits> LoadCategorical(const DataRequest& r) {
  if (r.model_fields < 1) {
    return InvalidArgumentError(
        "--dataset categorical is for models with embedding tables (--model embed-mlp, or one "
        "of yours with ModelBuilder::Embedding)");
  }
  return GeneratedSplits(CategoricalFor(r), worker::MakeCategoricalDataset, "categorical", r.seed);
}

// Targets of a hidden linear function of the model's features (a vector [F]) plus noise.
Result<DataSplits> LoadRegression(const DataRequest& r) {
  if (r.model_input.size() != 1) {
    return InvalidArgumentError("--dataset regression is for models of a feature vector [F], not " +
                                ShapeToString(r.model_input) + " (--model regression_mlp)");
  }
  return GeneratedSplits(worker::RegressionOptions{.features = static_cast<int>(r.model_input[0]),
                                                   .weights_seed = r.seed},
                         worker::MakeRegressionDataset, "regression", r.seed);
}

Result<DataSplits> LoadSynthetic(const DataRequest& r) {
  const bool crops = TakesTutorialCrops(r.model_input);
  worker::SyntheticOptions so;
  so.example_shape = crops ? Shape{r.model_input[0], 32, 32} : r.model_input;
  so.size = 10000;
  so.seed = r.seed;
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train, worker::MakeSyntheticDataset(so));
  so.size = 2000;
  so.seed = r.seed + 1;
  TOWERPS_ASSIGN_OR_RETURN(d.test, worker::MakeSyntheticDataset(so));
  d.preprocessing.mean = {0.5f};
  d.preprocessing.stddev = {0.25f};
  if (crops) {
    d.preprocessing.crop_h = d.preprocessing.crop_w = 24;
    d.preprocessing.random_crop_flip = true;
  }
  return d;
}

// ---- criteo ------------------------------------------------------------------------------------

constexpr char kCriteoFiles[] =
    "--dataset criteo needs --data-dir with train.txt and test.txt, both in the Criteo format "
    "with labels (scripts/make_ctr_data.py writes such files)";

Result<Dataset> LoadCriteoSplit(const DataRequest& r, const std::string& file) {
  const std::string path = r.data_dir + "/" + file;
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<worker::CriteoStream> stream,
                           worker::CriteoStream::Open(path, {.skip_bad_lines = r.skip_bad_lines}));
  TOWERPS_ASSIGN_OR_RETURN(Dataset d, worker::ReadCriteoStream(*stream, "criteo/" + file));
  if (const std::string notes = stream->Notes(); !notes.empty()) TOWERPS_LOG(kWarning) << notes;
  return d;
}

Result<DataSplits> LoadCriteo(const DataRequest& r) {
  if (r.data_dir.empty()) return InvalidArgumentError(kCriteoFiles);
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train, LoadCriteoSplit(r, "train.txt"));
  TOWERPS_ASSIGN_OR_RETURN(d.test, LoadCriteoSplit(r, "test.txt"));
  // DLRM's transform, log(1 + x), is the whole preprocessing: no normalization on top.
  d.preprocessing.mean = {0.0f};
  d.preprocessing.stddev = {1.0f};
  return d;
}

// A split read line by line, for --shuffle-buffer.
Result<std::unique_ptr<ExampleStream>> OpenCriteo(const DataRequest& r, const std::string& split) {
  if (r.data_dir.empty()) return InvalidArgumentError(kCriteoFiles);
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<worker::CriteoStream> s,
                           worker::CriteoStream::Open(r.data_dir + "/" + split + ".txt",
                                                      {.skip_bad_lines = r.skip_bad_lines}));
  return std::unique_ptr<ExampleStream>(std::move(s));
}

Result<DatasetInfo> ProbeCriteo(const DataRequest& r) {
  if (r.data_dir.empty()) return InvalidArgumentError(kCriteoFiles);
  for (const char* file : {"train.txt", "test.txt"}) {
    const std::string path = r.data_dir + "/" + file;
    if (!std::ifstream(path)) return NotFoundError(path + ": cannot open (" + kCriteoFiles + ")");
  }
  return DatasetInfo{.example_shape = {worker::kCriteoIntegerFeatures},
                     .num_classes = 2,
                     .fields = worker::kCriteoCategoricalFeatures};
}

}  // namespace

void AddStockDatasets(Registry* registry) {
  const auto add = [&](const std::string& name, DatasetDef def) {
    TOWERPS_CHECK(registry->AddDataset(name, std::move(def)).ok()) << name;
  };
  add("fashion-mnist", {.summary = "Fashion-MNIST IDX files, 1x28x28, 10 classes (default: the "
                                   "dataset-fashion-mnist package; or --data-dir)",
                        .load = LoadFashionMnist,
                        .probe = ProbeFashionMnist});
  add("idx",
      {.summary = "any IDX images [n, h, w] and labels: MNIST's file names in --data-dir, or "
                  "--train-images, --train-labels, --test-images, --test-labels",
       .load = LoadIdx,
       .probe = ProbeIdx});
  add("cifar10",
      {.summary = "CIFAR-10 binary batches in --data-dir, 3x32x32 (24x24 crops for models that "
                  "take them)",
       .load = LoadCifar10,
       .probe = ProbeCifar10});
  add("npy",
      {.summary = "x_train.npy, y_train.npy, x_test.npy, y_test.npy in --data-dir (x float32 or "
                  "uint8 [N, ...], y integers [N]); with categorical ids, x_ids_*.npy (integers "
                  "[N, F]) beside x_dense_*.npy (features used as they are), and multi-hot "
                  "fields as x_multi_hot<k>_ids_*.npy and x_multi_hot<k>_offsets_*.npy",
       .load = worker::LoadNpyDataset,
       .probe = worker::ProbeNpyDataset});
  add("criteo",
      {.summary = "Criteo click logs (train.txt, test.txt in --data-dir): 13 integer features "
                  "as log(1 + x), 26 categorical ids, click labels (--skip-bad-lines; "
                  "--shuffle-buffer streams files larger than memory)",
       .load = LoadCriteo,
       .probe = ProbeCriteo,
       .open = OpenCriteo,
       // DLRM's transform, log(1 + x), is the whole preprocessing, as loaded whole.
       .stream_preprocessing = {.mean = {0.0f}, .stddev = {1.0f}}});
  add("categorical",
      {.summary = "seeded categorical ids (one Zipf field per table field, and 0-6 ids per "
                  "multi-hot field) and 4 dense features, 4 classes a known function of them "
                  "(embedding models)",
       .load = LoadCategorical,
       .probe = [](const DataRequest& r) -> Result<DatasetInfo> {
         if (r.model_fields < 1) return LoadCategorical(r).status();  // names what it is for
         const worker::CategoricalOptions o = CategoricalFor(r);
         return DatasetInfo{.example_shape = {o.dense},
                            .num_classes = o.num_classes,
                            .fields = r.model_fields,
                            .multi_hot = r.model_multi_hot};
       }});
  add("regression",
      {.summary = "seeded features of the model's vector [F] and a float target, a hidden linear "
                  "function of them plus noise of stddev 0.1: the best test RMSE is 0.1 "
                  "(regression models)",
       .load = LoadRegression,
       .probe = [](const DataRequest& r) -> Result<DatasetInfo> {
         if (r.model_input.size() != 1) return LoadRegression(r).status();
         return DatasetInfo{.example_shape = r.model_input, .regression = true};
       }});
  add("synthetic",
      {.summary = "seeded random images of the model's input shape (benchmarks, tests)",
       .load = LoadSynthetic,
       .probe = [](const DataRequest& r) -> Result<DatasetInfo> {
         return DatasetInfo{.example_shape = r.model_input, .num_classes = 10};
       }});
}

}  // namespace towerps
