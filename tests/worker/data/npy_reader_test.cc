// The .npy reader, the npy and idx stock datasets built on it and on the IDX reader, and
// LoadJobData's normalization for datasets that bring none.
#include "worker/data/npy_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "kernels/cpu/cpu_backend.h"
#include "tests/testing/status_assert.h"
#include "tests/worker/data/idx_test_files.h"
#include "towerps/registry.h"
#include "worker/model/model_factory.h"
#include "worker/train/job_data.h"

namespace towerps::worker {
namespace {

using testing::IdxBytes;
using testing::TestDir;

// A version 1.0 .npy file as numpy.save writes it: magic, padded dict, then the raw data.
std::string NpyBytes(const std::string& descr, const std::string& shape, const std::string& data,
                     const std::string& order = "False") {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::string s = "\x93NUMPY\x01";
  s.push_back('\0');
  s.push_back(static_cast<char>(dict.size() & 0xff));
  s.push_back(static_cast<char>(dict.size() >> 8));
  return s + dict + data;
}

template <typename T>
std::string Raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

void Write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

TEST(NpyReaderTest, ReadsFloatAndIntegerArrays) {
  TestDir dir("npy");
  const std::vector<float> x = {0.5f, -1.25f, 3.0f, 4.5f, 5.0f, 6.0f};
  Write(dir.path() / "x.npy", NpyBytes("<f4", "(2, 1, 3)", Raw(x)));
  ASSERT_OK_AND_ASSIGN(NpyArray a, ReadNpyFile((dir.path() / "x.npy").string()));
  EXPECT_EQ(a.header.shape, (Shape{2, 1, 3}));
  EXPECT_EQ(a.header.kind, 'f');
  ASSERT_EQ(a.data.size(), 24u);
  float back[6];
  std::memcpy(back, a.data.data(), 24);
  EXPECT_EQ(back[1], -1.25f);
  const std::vector<int16_t> y = {-3, 7, 32000};
  Write(dir.path() / "y.npy", NpyBytes("<i2", "(3,)", Raw(y)));
  ASSERT_OK_AND_ASSIGN(NpyArray b, ReadNpyFile((dir.path() / "y.npy").string()));
  EXPECT_EQ(NpyIntegerAt(b, 0), -3);  // sign-extended
  EXPECT_EQ(NpyIntegerAt(b, 2), 32000);
}

TEST(NpyReaderTest, BadFilesNameTheFileAndTheProblem) {
  TestDir dir("npy");
  const std::string four_floats = Raw(std::vector<float>(4, 1.0f));
  struct Case {
    std::string bytes, expect;
  } cases[] = {
      {"PK\x03\x04 not npy at all", "bad magic"},
      {NpyBytes("<f4", "(4,)", four_floats, "True"), "fortran_order is True"},
      {NpyBytes(">f4", "(4,)", four_floats), "dtype '>f4' is not supported"},
      {NpyBytes("<c8", "(2,)", four_floats), "dtype '<c8' is not supported"},
      {NpyBytes("<f4", "(5,)", four_floats), "needs 20 data bytes, but the file holds 16"},
      {NpyBytes("<f4", "(4,)", four_floats.substr(0, 10)), "needs 16 data bytes"},
      {NpyBytes("<f4", "[4]", four_floats), "not a dict"},
      {NpyBytes("<f4", "(99999999999999999999,)", four_floats), "not a dict"},
      {std::string("\x93NUMPY\x09\x00\x10\x00", 10), "version 9.0 is not supported"},
      {std::string("\x93NUMPY\x01\x00\xff\x00{", 11), "truncated"},
  };
  for (const Case& c : cases) {
    const std::string path = (dir.path() / "bad.npy").string();
    Write(path, c.bytes);
    Result<NpyArray> r = ReadNpyFile(path);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status();
  }
  EXPECT_EQ(ReadNpyFile((dir.path() / "missing.npy").string()).status().code(),
            StatusCode::kNotFound);
}

class NpyDatasetTest : public ::testing::Test {
 protected:
  // x [n, 2, 3] float32 (one channel of 2x3) and y int64, for both splits.
  void WriteSplit(const std::string& split, int n, const std::string& y_descr = "<i8") {
    std::vector<float> x(static_cast<size_t>(n) * 6);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 2.0f;
    Write(dir_.path() / ("x_" + split + ".npy"),
          NpyBytes("<f4", "(" + std::to_string(n) + ", 2, 3)", Raw(x)));
    std::vector<int64_t> y(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) y[static_cast<size_t>(i)] = i % 3;
    Write(dir_.path() / ("y_" + split + ".npy"),
          NpyBytes(y_descr, "(" + std::to_string(n) + ",)",
                   y_descr == "<f8" ? Raw(std::vector<double>(y.begin(), y.end())) : Raw(y)));
  }
  DataRequest Request() const {
    DataRequest r;
    r.data_dir = dir_.path().string();
    r.model_input = {1, 2, 3};
    return r;
  }
  TestDir dir_{"npy_dataset"};
  Registry registry_ = StockRegistry();
};

TEST_F(NpyDatasetTest, LoadsBothSplitsAndNormalizesWithTheTrainingStatistics) {
  WriteSplit("train", 10);
  WriteSplit("test", 4);
  ASSERT_OK_AND_ASSIGN(const DatasetInfo info, (*registry_.FindDataset("npy"))->probe(Request()));
  EXPECT_EQ(info.example_shape, (Shape{1, 2, 3}));  // [N, H, W] is one channel
  ASSERT_OK_AND_ASSIGN(JobData d, LoadJobData(registry_, "npy", Request(), 2));
  EXPECT_EQ(d.train.size(), 10);
  EXPECT_EQ(d.train.num_classes, 3);  // from the labels
  EXPECT_TRUE(d.train.is_float());
  // Mean and stddev of the 60 training values, computed here in double.
  double sum = 0, sq = 0;
  for (float v : d.train.values) sum += v, sq += double{v} * v;
  const double mean = sum / 60, stddev = std::sqrt(sq / 60 - mean * mean);
  ASSERT_EQ(d.train_options.mean.size(), 1u);
  EXPECT_FLOAT_EQ(d.train_options.mean[0], static_cast<float>(mean));
  EXPECT_FLOAT_EQ(d.train_options.stddev[0], static_cast<float>(stddev));
  // The batches are (v - mean) / stddev.
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Create(&d.test, d.test_options));
  Batch batch;
  ASSERT_TRUE(batcher->Next(&batch));
  EXPECT_FLOAT_EQ(batch.x[1], static_cast<float>((d.test.values[1] - mean) / stddev));
}

// A tabular [N, F] set whose features differ in scale (1x to 1000x) is normalized per feature:
// every feature of the training batches has mean 0 and deviation 1 (one mean and deviation for
// all features left the large one dominating).
TEST_F(NpyDatasetTest, VectorsAreNormalizedPerFeature) {
  constexpr int kN = 400;
  const std::vector<double> scale = {1.0, 30.0, 1000.0};
  auto write = [&](const std::string& split, int n) {
    std::vector<float> x;
    std::vector<int64_t> y;
    for (int i = 0; i < n; ++i) {
      for (size_t f = 0; f < scale.size(); ++f) {
        x.push_back(static_cast<float>(scale[f] * (std::sin(1.7 * i + f) + 0.25 * f)));
      }
      y.push_back(i % 2);
    }
    Write(dir_.path() / ("x_" + split + ".npy"),
          NpyBytes("<f4", "(" + std::to_string(n) + ", 3)", Raw(x)));
    Write(dir_.path() / ("y_" + split + ".npy"),
          NpyBytes("<i8", "(" + std::to_string(n) + ",)", Raw(y)));
  };
  write("train", kN);
  write("test", 8);
  DataRequest request = Request();
  request.model_input = {3};
  ASSERT_OK_AND_ASSIGN(JobData d, LoadJobData(registry_, "npy", request, kN));
  ASSERT_EQ(d.train_options.mean.size(), 3u);
  ASSERT_EQ(d.train_options.stddev.size(), 3u);
  EXPECT_GT(d.train_options.stddev[2], 100 * d.train_options.stddev[0]);
  BatcherOptions whole = d.train_options;
  whole.shuffle = false;
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Create(&d.train, whole));
  Batch batch;
  ASSERT_TRUE(batcher->Next(&batch));
  ASSERT_EQ(batch.size, kN);
  for (size_t f = 0; f < 3; ++f) {
    double sum = 0, sq = 0;
    for (int i = 0; i < kN; ++i) {
      const double v = batch.x[static_cast<size_t>(i) * 3 + f];
      sum += v;
      sq += v * v;
    }
    EXPECT_NEAR(sum / kN, 0.0, 1e-4) << "feature " << f;
    EXPECT_NEAR(std::sqrt(sq / kN), 1.0, 1e-4) << "feature " << f;
  }
  // A dataset's own per-feature statistics are taken as given; a count that fits neither one
  // for all nor one per feature is named.
  BatcherOptions given = whole;
  given.mean = {1.0f, 2.0f, 3.0f};
  given.stddev = {2.0f, 4.0f, 8.0f};
  ASSERT_OK_AND_ASSIGN(auto own, Batcher::Create(&d.train, given));
  ASSERT_TRUE(own->Next(&batch));
  EXPECT_FLOAT_EQ(batch.x[2], (d.train.values[2] - 3.0f) / 8.0f);
  given.stddev = {2.0f, 4.0f};
  Result<std::unique_ptr<Batcher>> bad = Batcher::Create(&d.train, given);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "npy/train: normalization needs one value for all features or one per feature (3 for "
            "examples [3]), but the stddev has 2");
}

TEST_F(NpyDatasetTest, MismatchesAreNamed) {
  WriteSplit("train", 10, "<f8");
  WriteSplit("test", 4);
  Result<JobData> r = LoadJobData(registry_, "npy", Request(), 2);
  ASSERT_FALSE(r.ok());
  // Float y is a regression's targets: both splits or neither.
  EXPECT_NE(r.status().message().find("y_train.npy holds float targets but y_test.npy integer "
                                      "labels"),
            std::string::npos)
      << r.status();
  WriteSplit("train", 10);
  Write(dir_.path() / "y_test.npy", NpyBytes("<i8", "(3,)", Raw(std::vector<int64_t>(3, 1))));
  r = LoadJobData(registry_, "npy", Request(), 2);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("x_test.npy holds 4 examples but"), std::string::npos)
      << r.status();
  // A model of another shape is refused from the headers alone, naming both shapes.
  Status fits = registry_.CheckFits("mlp", "npy", Request());
  EXPECT_EQ(fits.message().substr(0, 60),
            "model mlp expects 1x28x28 inputs, but npy examples are 1x2x3");
}

// Categorical ids beside the dense features: x_ids_<split>.npy [N, F], whose int64 bits are the
// ids; x_dense_<split>.npy is used as it is (no normalization).
TEST_F(NpyDatasetTest, IdsBesideDenseFeatures) {
  WriteSplit("train", 10);
  WriteSplit("test", 4);
  for (const char* split : {"train", "test"}) {
    const int n = std::string(split) == "train" ? 10 : 4;
    std::filesystem::rename(dir_.path() / ("x_" + std::string(split) + ".npy"),
                            dir_.path() / ("x_dense_" + std::string(split) + ".npy"));
    std::vector<int64_t> ids(static_cast<size_t>(n) * 3);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i) - 5;
    Write(dir_.path() / ("x_ids_" + std::string(split) + ".npy"),
          NpyBytes("<i8", "(" + std::to_string(n) + ", 3)", Raw(ids)));
  }
  ASSERT_OK_AND_ASSIGN(const DatasetInfo info, (*registry_.FindDataset("npy"))->probe(Request()));
  EXPECT_EQ(info.fields, 3);
  ASSERT_OK_AND_ASSIGN(const DataSplits d, (*registry_.FindDataset("npy"))->load(Request()));
  EXPECT_EQ(d.train.fields, 3);
  ASSERT_EQ(d.train.ids.size(), 30u);
  EXPECT_EQ(d.train.ids[0], static_cast<uint64_t>(int64_t{-5}));  // the bits, as written
  EXPECT_EQ(d.train.ids[29], 24u);
  EXPECT_EQ(d.preprocessing.mean, std::vector<float>{0.0f});
  EXPECT_EQ(d.preprocessing.stddev, std::vector<float>{1.0f});
  // Ids that do not match the examples are named.
  Write(dir_.path() / "x_ids_test.npy", NpyBytes("<i8", "(5, 3)", Raw(std::vector<int64_t>(15))));
  Result<DataSplits> bad = (*registry_.FindDataset("npy"))->load(Request());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x_ids_test.npy: ids must be integers [N, F] for the 4 "
                                        "examples, not '<i8' of shape [5, 3]"),
            std::string::npos)
      << bad.status();
}

// Multi-hot fields as ids and offsets beside the examples: loaded per split, counted by the
// probe, and offsets that do not fit are named with their files.
TEST_F(NpyDatasetTest, MultiHotFieldsAsIdsAndOffsets) {
  WriteSplit("train", 4);
  WriteSplit("test", 2);
  const auto write = [&](int k, const std::string& split, const std::vector<int64_t>& offsets,
                         const std::vector<int64_t>& ids) {
    const std::string base = "x_multi_hot" + std::to_string(k) + "_";
    Write(dir_.path() / (base + "offsets_" + split + ".npy"),
          NpyBytes("<i8", "(" + std::to_string(offsets.size()) + ",)", Raw(offsets)));
    Write(dir_.path() / (base + "ids_" + split + ".npy"),
          NpyBytes("<i8", "(" + std::to_string(ids.size()) + ",)", Raw(ids)));
  };
  write(0, "train", {0, 2, 2, 3, 5}, {7, 8, 9, 7, 1});  // example 1 has none
  write(0, "test", {0, 1, 1}, {4});
  write(1, "train", {0, 1, 2, 3, 4}, {1, 2, 3, 4});
  write(1, "test", {0, 1, 2}, {5, 6});
  ASSERT_OK_AND_ASSIGN(const DatasetInfo info, (*registry_.FindDataset("npy"))->probe(Request()));
  EXPECT_EQ(info.multi_hot, 2);
  ASSERT_OK_AND_ASSIGN(const DataSplits d, (*registry_.FindDataset("npy"))->load(Request()));
  ASSERT_EQ(d.train.multi_hot.size(), 2u);
  EXPECT_EQ(d.train.multi_hot[0].offsets, (std::vector<uint64_t>{0, 2, 2, 3, 5}));
  EXPECT_EQ(d.train.multi_hot[0].ids, (std::vector<uint64_t>{7, 8, 9, 7, 1}));
  EXPECT_EQ(d.test.multi_hot[1].ids, (std::vector<uint64_t>{5, 6}));
  write(1, "test", {0, 2, 1}, {5, 6});
  Result<DataSplits> bad = (*registry_.FindDataset("npy"))->load(Request());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x_multi_hot1_offsets_test.npy"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("example 1's ids end at 1, before they start (2)"),
            std::string::npos)
      << bad.status();
  std::filesystem::remove(dir_.path() / "x_multi_hot1_ids_test.npy");
  bad = (*registry_.FindDataset("npy"))->load(Request());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("2 multi-hot fields"), std::string::npos) << bad.status();
}

// Float y is a regression's targets (Dataset::targets), float32 or float64; a non-finite one is
// named.
TEST_F(NpyDatasetTest, FloatYIsARegressionsTargets) {
  WriteSplit("train", 4);
  WriteSplit("test", 2);
  Write(dir_.path() / "y_train.npy",
        NpyBytes("<f4", "(4,)", Raw(std::vector<float>{0.5f, -1.0f, 2.25f, 0.0f})));
  Write(dir_.path() / "y_test.npy", NpyBytes("<f8", "(2,)", Raw(std::vector<double>{1.5, -3})));
  ASSERT_OK_AND_ASSIGN(const DatasetInfo info, (*registry_.FindDataset("npy"))->probe(Request()));
  EXPECT_TRUE(info.regression);
  ASSERT_OK_AND_ASSIGN(const DataSplits d, (*registry_.FindDataset("npy"))->load(Request()));
  EXPECT_TRUE(d.train.regression());
  EXPECT_TRUE(d.train.labels.empty());
  EXPECT_EQ(d.train.size(), 4);
  EXPECT_EQ(d.train.targets, (std::vector<float>{0.5f, -1.0f, 2.25f, 0.0f}));
  EXPECT_EQ(d.test.targets, (std::vector<float>{1.5f, -3.0f}));
  Write(dir_.path() / "y_test.npy",
        NpyBytes("<f8", "(2,)", Raw(std::vector<double>{1.5, std::nan("")})));
  Result<DataSplits> bad = (*registry_.FindDataset("npy"))->load(Request());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("y_test.npy: the target of example 1 is nan"),
            std::string::npos)
      << bad.status();
}

// A NaN in x is named with its file, example and element when the data is read (it was reported
// as a diverged loss, blaming the learning rate).
TEST_F(NpyDatasetTest, ANonFiniteValueIsNamedWithItsFileAndExample) {
  WriteSplit("train", 10);
  WriteSplit("test", 4);
  std::vector<float> x(60, 0.5f);
  x[3 * 6 + 4] = std::nanf("");
  Write(dir_.path() / "x_train.npy", NpyBytes("<f4", "(10, 2, 3)", Raw(x)));
  Result<JobData> r = LoadJobData(registry_, "npy", Request(), 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("x_train.npy: example 3 holds nan at element 4"),
            std::string::npos)
      << r.status();
}

// A label only the test split has is named there, with its example, against the model's outputs
// (it was reported as "npy/train has 8 classes").
TEST_F(NpyDatasetTest, ALabelTheModelHasNoOutputForIsNamedInItsSplit) {
  WriteSplit("train", 10);  // labels 0..2
  Write(dir_.path() / "x_test.npy", NpyBytes("<f4", "(4, 2, 3)", Raw(std::vector<float>(24, 1))));
  Write(dir_.path() / "y_test.npy", NpyBytes("<i8", "(4,)", Raw(std::vector<int64_t>{0, 1, 7, 2})));
  ASSERT_OK_AND_ASSIGN(JobData d, LoadJobData(registry_, "npy", Request(), 2));
  ModelBuilder b({1, 2, 3});
  b.Dense("logits", 3);
  ASSERT_OK_AND_ASSIGN(auto cpu, kernels::CpuBackend::Create({}));
  ASSERT_OK_AND_ASSIGN(auto model, BuildModel<float>(b, cpu.get(), 1));
  ASSERT_OK_AND_ASSIGN(JobBatches batches, MakeJobBatches(d, 0, 1));
  Result<int64_t> fits = CheckDataFitsJob(d, *batches.train, *model, "tiny", 1, 2);
  ASSERT_FALSE(fits.ok());
  EXPECT_EQ(fits.status().message(),
            "npy/test: label 7 of example 2 needs 8 outputs, but model tiny has 3");
}

TEST(IdxDatasetTest, AnyFileNamesAndImageSize) {
  TestDir dir("idx_dataset");
  std::vector<uint8_t> images(5 * 4 * 6), labels = {0, 4, 2, 4, 1};
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<uint8_t>(i * 3);
  Write(dir.path() / "my-train-x", IdxBytes({5, 4, 6}, images));
  Write(dir.path() / "my-train-y", IdxBytes({5}, labels));
  Write(dir.path() / "my-test-x", IdxBytes({5, 4, 6}, images));
  Write(dir.path() / "my-test-y", IdxBytes({5}, labels));
  DataRequest r;
  r.data_dir = dir.path().string();
  r.train_images = "my-train-x";
  r.train_labels = "my-train-y";
  r.test_images = (dir.path() / "my-test-x").string();  // absolute works too
  r.test_labels = "my-test-y";
  const Registry registry = StockRegistry();
  ASSERT_OK_AND_ASSIGN(const DatasetInfo info, (*registry.FindDataset("idx"))->probe(r));
  EXPECT_EQ(info.example_shape, (Shape{1, 4, 6}));
  ASSERT_OK_AND_ASSIGN(JobData d, LoadJobData(registry, "idx", r, 5));
  EXPECT_EQ(d.train.example_shape, (Shape{1, 4, 6}));
  EXPECT_EQ(d.train.num_classes, 5);
  EXPECT_EQ(d.test.labels[3], 4);
  r.train_images = "nope";
  Result<JobData> missing = LoadJobData(registry, "idx", r, 5);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos) << missing.status();
}

TEST(DatasetTest, ValidateNamesTheProblem) {
  Dataset d;
  d.name = "mine";
  d.example_shape = {1, 2, 2};
  d.num_classes = 2;
  d.pixels = {1, 2, 3, 4, 5, 6, 7, 8};
  d.labels = {0, 1};
  EXPECT_OK(d.Validate());
  d.labels[1] = 2;
  EXPECT_NE(d.Validate().message().find("label 2 of example 1 is not in [0, 2)"),
            std::string::npos);
  d.labels[1] = 1;
  d.pixels.pop_back();
  EXPECT_NE(d.Validate().message().find("2 labels need 8 elements"), std::string::npos);
  d.values = {1.0f};
  EXPECT_NE(d.Validate().message().find("both pixels and values"), std::string::npos);
}

}  // namespace
}  // namespace towerps::worker
