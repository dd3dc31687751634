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
#include "worker/data/fashion_mnist.h"
#include "worker/data/idx_reader.h"
#include "worker/data/npy_reader.h"
#include "worker/data/synthetic.h"

namespace towerps {
namespace {

using worker::Split;

// The TensorFlow CIFAR-10 tutorial's models take 24x24 crops of the 32x32 images.
bool TakesTutorialCrops(const Shape& input) {
  return input.size() == 3 && input[1] == 24 && input[2] == 24;
}

std::string Resolve(const std::string& dir, const std::string& file) {
  if (file.empty() || file[0] == '/' || dir.empty()) return file;
  return dir + "/" + file;
}

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

// The largest label + 1 over both splits; the model must have at least that many outputs.
int ClassCount(const DataSplits& d) {
  int32_t top = 0;
  for (const Dataset* s : {&d.train, &d.test}) {
    for (int32_t l : s->labels) top = std::max(top, l);
  }
  return top + 1;
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

// 4 dense features beside the model's categorical fields, 1000 ids per field, 4 classes.
worker::CategoricalOptions CategoricalFor(const DataRequest& r) {
  worker::CategoricalOptions o;
  o.fields = r.model_fields;
  o.scores_seed = r.seed;
  return o;
}

Result<DataSplits> LoadCategorical(const DataRequest& r) {
  if (r.model_fields < 1) {
    return InvalidArgumentError(
        "--dataset categorical is for models with embedding tables (--model embed-mlp, or one "
        "of yours with ModelBuilder::Embedding)");
  }
  worker::CategoricalOptions o = CategoricalFor(r);
  o.seed = r.seed;
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train, worker::MakeCategoricalDataset(o));
  o.size = 4000;
  o.seed = r.seed + 1;
  TOWERPS_ASSIGN_OR_RETURN(d.test, worker::MakeCategoricalDataset(o));
  d.train.name = "categorical/train";
  d.test.name = "categorical/test";
  d.preprocessing.mean = {0.0f};  // standard normal already
  d.preprocessing.stddev = {1.0f};
  return d;
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

// ---- npy ---------------------------------------------------------------------------------------

// [N, H, W] is one channel; [N, C, H, W] and [N, F] are taken as they are.
Result<Shape> NpyExampleShape(const std::string& path, const Shape& shape) {
  if (shape.size() == 3) return Shape{1, shape[1], shape[2]};
  if (shape.size() == 4 || shape.size() == 2) return Shape(shape.begin() + 1, shape.end());
  return InvalidArgumentError(path + ": x has shape " + ShapeToString(shape) +
                              "; expected [N, features], [N, H, W] or [N, C, H, W]");
}

// A split's dense features: x_dense_<split>.npy (a dataset with categorical ids, its dense part
// preprocessed already) or x_<split>.npy.
std::string NpyDensePath(const std::string& dir, const std::string& split) {
  const std::string dense = Resolve(dir, "x_dense_" + split + ".npy");
  return std::ifstream(dense) ? dense : Resolve(dir, "x_" + split + ".npy");
}

// x_ids_<split>.npy, when there: integers [N, F], F categorical ids per example (int64 as
// written; their bits are the ids).
Status LoadNpyIds(const std::string& dir, const std::string& split, Dataset* d) {
  const std::string path = Resolve(dir, "x_ids_" + split + ".npy");
  if (!std::ifstream(path)) return Status::Ok();
  TOWERPS_ASSIGN_OR_RETURN(const worker::NpyArray ids, worker::ReadNpyFile(path));
  const Shape& s = ids.header.shape;
  if (ids.header.kind == 'f' || s.size() != 2 || s[0] != d->size() || s[1] < 1) {
    return InvalidArgumentError(path + ": ids must be integers [N, F] for the " +
                                std::to_string(d->size()) + " examples, not '" + ids.header.descr +
                                "' of shape " + ShapeToString(s));
  }
  d->fields = static_cast<int>(s[1]);
  d->ids.resize(static_cast<size_t>(s[0] * s[1]));
  for (size_t i = 0; i < d->ids.size(); ++i) {
    d->ids[i] = static_cast<uint64_t>(worker::NpyIntegerAt(ids, static_cast<int64_t>(i)));
  }
  return Status::Ok();
}

Result<Dataset> LoadNpySplit(const std::string& dir, const std::string& split) {
  const std::string xp = NpyDensePath(dir, split), yp = Resolve(dir, "y_" + split + ".npy");
  TOWERPS_ASSIGN_OR_RETURN(worker::NpyArray x, worker::ReadNpyFile(xp));
  TOWERPS_ASSIGN_OR_RETURN(const worker::NpyArray y, worker::ReadNpyFile(yp));
  const worker::NpyHeader& xh = x.header;
  const bool u8 = xh.kind == 'u' && xh.item_size == 1, f32 = xh.kind == 'f' && xh.item_size == 4;
  if (!u8 && !f32) {
    return InvalidArgumentError(xp + ": x has dtype '" + xh.descr +
                                "'; save it as float32 or uint8 (x.astype(numpy.float32))");
  }
  if (y.header.kind == 'f' || y.header.shape.size() != 1) {
    return InvalidArgumentError(yp + ": y must be integer labels of shape [N], not '" +
                                y.header.descr + "' of shape " + ShapeToString(y.header.shape));
  }
  if (xh.shape.empty() || xh.shape[0] != y.header.shape[0]) {
    return InvalidArgumentError(
        xp + " holds " + (xh.shape.empty() ? "0" : std::to_string(xh.shape[0])) + " examples but " +
        yp + " holds " + std::to_string(y.header.shape[0]) + " labels");
  }
  Dataset d;
  d.name = "npy/" + split;
  TOWERPS_ASSIGN_OR_RETURN(d.example_shape, NpyExampleShape(xp, xh.shape));
  const int64_t n = y.header.shape[0];
  d.labels.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = worker::NpyIntegerAt(y, i);
    if (label < 0 || label >= (int64_t{1} << 24)) {
      return InvalidArgumentError(yp + ": label " + std::to_string(label) + " of example " +
                                  std::to_string(i) + " is not a class index in [0, 2^24)");
    }
    d.labels[static_cast<size_t>(i)] = static_cast<int32_t>(label);
  }
  if (u8) {
    d.pixels = std::move(x.data);
  } else {
    d.values.resize(x.data.size() / 4);
    std::memcpy(d.values.data(), x.data.data(), x.data.size());
    // A NaN or an infinity would surface as a diverged loss, blaming the learning rate.
    if (const int64_t bad = FindNonFinite(d.values.data(), static_cast<int64_t>(d.values.size()));
        bad >= 0) {
      const int64_t per = std::max<int64_t>(1, d.example_size());
      return InvalidArgumentError(xp + ": example " + std::to_string(bad / per) + " holds " +
                                  DescribeValue(d.values[static_cast<size_t>(bad)]) +
                                  " at element " + std::to_string(bad % per) +
                                  "; clean or drop it (numpy.isfinite(x).all(axis=...))");
    }
  }
  TOWERPS_RETURN_IF_ERROR(LoadNpyIds(dir, split, &d));
  return d;
}

Result<DataSplits> LoadNpy(const DataRequest& r) {
  if (r.data_dir.empty()) {
    return InvalidArgumentError(
        "--dataset npy needs --data-dir with x_train.npy, y_train.npy, "
        "x_test.npy and y_test.npy");
  }
  DataSplits d;
  TOWERPS_ASSIGN_OR_RETURN(d.train, LoadNpySplit(r.data_dir, "train"));
  TOWERPS_ASSIGN_OR_RETURN(d.test, LoadNpySplit(r.data_dir, "test"));
  if (d.train.example_shape != d.test.example_shape) {
    return InvalidArgumentError("npy: x_train examples are " +
                                ShapeToString(d.train.example_shape) + " but x_test examples are " +
                                ShapeToString(d.test.example_shape));
  }
  if (d.train.fields != d.test.fields) {
    return InvalidArgumentError("npy: x_ids_train holds " + std::to_string(d.train.fields) +
                                " ids per example but x_ids_test " + std::to_string(d.test.fields));
  }
  d.train.num_classes = d.test.num_classes = ClassCount(d);
  if (NpyDensePath(r.data_dir, "train").ends_with("x_dense_train.npy")) {
    d.preprocessing.mean = {0.0f};  // preprocessed already (scripts/to_npy.py criteo)
    d.preprocessing.stddev = {1.0f};
  }
  return d;  // otherwise normalization: from the training set
}

Result<DatasetInfo> ProbeNpy(const DataRequest& r) {
  if (r.data_dir.empty()) return LoadNpy(r).status();
  const std::string xp = NpyDensePath(r.data_dir, "train");
  TOWERPS_ASSIGN_OR_RETURN(const worker::NpyHeader h, worker::ReadNpyHeader(xp));
  TOWERPS_ASSIGN_OR_RETURN(Shape example, NpyExampleShape(xp, h.shape));
  int fields = 0;
  const std::string ids = Resolve(r.data_dir, "x_ids_train.npy");
  if (std::ifstream(ids)) {
    TOWERPS_ASSIGN_OR_RETURN(const worker::NpyHeader ih, worker::ReadNpyHeader(ids));
    fields = ih.shape.size() == 2 ? static_cast<int>(ih.shape[1]) : 0;
  }
  return DatasetInfo{.example_shape = std::move(example), .fields = fields};
}

// ---- criteo ------------------------------------------------------------------------------------

constexpr char kCriteoFiles[] =
    "--dataset criteo needs --data-dir with train.txt and test.txt, both in the Criteo format "
    "with labels (scripts/make_ctr_data.py writes such files)";

Result<Dataset> LoadCriteoSplit(const DataRequest& r, const std::string& file) {
  const std::string path = r.data_dir + "/" + file;
  worker::CriteoReadStats stats;
  Result<Dataset> d =
      worker::ReadCriteoFile(path, "criteo/" + file, {.skip_bad_lines = r.skip_bad_lines}, &stats);
  if (d.ok() && stats.skipped > 0) {
    TOWERPS_LOG(kWarning) << path << ": skipped " << stats.skipped << " malformed line(s) of "
                          << stats.lines << " (--skip-bad-lines); the first, "
                          << stats.first_skipped;
  }
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
                  "[N, F]) beside x_dense_*.npy (features used as they are)",
       .load = LoadNpy,
       .probe = ProbeNpy});
  add("criteo",
      {.summary = "Criteo click logs (train.txt, test.txt in --data-dir): 13 integer features "
                  "as log(1 + x), 26 categorical ids, click labels (--skip-bad-lines)",
       .load = LoadCriteo,
       .probe = ProbeCriteo});
  add("categorical",
      {.summary = "seeded categorical ids (one Zipf field per table field) and 4 dense features, "
                  "4 classes a known function of them (embedding models)",
       .load = LoadCategorical,
       .probe = [](const DataRequest& r) -> Result<DatasetInfo> {
         if (r.model_fields < 1) return LoadCategorical(r).status();  // names what it is for
         const worker::CategoricalOptions o = CategoricalFor(r);
         return DatasetInfo{
             .example_shape = {o.dense}, .num_classes = o.num_classes, .fields = r.model_fields};
       }});
  add("synthetic",
      {.summary = "seeded random images of the model's input shape (benchmarks, tests)",
       .load = LoadSynthetic,
       .probe = [](const DataRequest& r) -> Result<DatasetInfo> {
         return DatasetInfo{.example_shape = r.model_input, .num_classes = 10};
       }});
}

}  // namespace towerps
