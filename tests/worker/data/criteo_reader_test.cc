// The Criteo click-log reader (worker/data/criteo_reader.h) and the criteo stock dataset: DLRM's
// transform of the integers, ids per field, empty fields, CRLF, and every malformed line named by
// file, line and field, or skipped and counted under --skip-bad-lines.
#include "worker/data/criteo_reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>

#include "tests/testing/status_assert.h"
#include "tests/worker/data/idx_test_files.h"
#include "towerps/registry.h"

namespace towerps::worker {
namespace {

using testing::TestDir;

// A line of the format from its 40 fields.
std::string Line(const std::vector<std::string>& fields) {
  std::string s;
  for (size_t i = 0; i < fields.size(); ++i) s += (i == 0 ? "" : "\t") + fields[i];
  return s;
}

// Label 1, integers 0..12 (I3 empty, I2 negative), categories "a0".."a25" (C5 empty).
std::vector<std::string> GoodFields() {
  std::vector<std::string> f = {"1"};
  for (int j = 0; j < kCriteoIntegerFeatures; ++j) f.push_back(std::to_string(j));
  f[2] = "-3";
  f[3] = "";
  for (int c = 0; c < kCriteoCategoricalFeatures; ++c) f.push_back("a" + std::to_string(c));
  f[1 + kCriteoIntegerFeatures + 4] = "";
  return f;
}

TEST(CriteoReaderTest, ParsesALineAsDlrmSeesIt) {
  int32_t label = -1;
  float dense[kCriteoIntegerFeatures];
  uint64_t ids[kCriteoCategoricalFeatures];
  ASSERT_OK(ParseCriteoLine(Line(GoodFields()) + "\r", &label, dense, ids));
  EXPECT_EQ(label, 1);
  for (int j = 0; j < kCriteoIntegerFeatures; ++j) {
    // I2 = -3 is clamped to 0 and I3 is empty: both log(1 + 0) = 0.
    const double x = j == 1 || j == 2 ? 0 : j;
    EXPECT_FLOAT_EQ(dense[j], static_cast<float>(std::log1p(x))) << "I" << j + 1;
  }
  std::set<uint64_t> distinct;
  for (int c = 0; c < kCriteoCategoricalFeatures; ++c) {
    const std::string value = c == 4 ? "" : "a" + std::to_string(c);
    EXPECT_EQ(ids[c], CriteoCategoricalId(c, value)) << "C" << c + 1;
    distinct.insert(ids[c]);
  }
  EXPECT_EQ(distinct.size(), 26u);
  // The same value in two fields is two ids; each field's empty value is its own id.
  EXPECT_NE(CriteoCategoricalId(0, "68fd1e64"), CriteoCategoricalId(1, "68fd1e64"));
  EXPECT_NE(CriteoCategoricalId(0, ""), CriteoCategoricalId(1, ""));
  EXPECT_NE(CriteoCategoricalId(0, ""), CriteoCategoricalId(0, "0"));
  // Fixed for good: checkpoints hold rows by these ids. FNV-1a of the field byte and the value,
  // then SplitMix64's finalizer, computed independently (in Python).
  EXPECT_EQ(CriteoCategoricalId(3, "68fd1e64"), 0x824ed398cbbcea56ull);
}

TEST(CriteoReaderTest, MalformedLinesNameTheField) {
  int32_t label;
  float dense[kCriteoIntegerFeatures];
  uint64_t ids[kCriteoCategoricalFeatures];
  const auto error = [&](std::vector<std::string> f) {
    return ParseCriteoLine(Line(f), &label, dense, ids).message();
  };
  std::vector<std::string> f = GoodFields();
  f[0] = "2";
  EXPECT_EQ(error(f), "field 1 (label) is '2', not 0 or 1");
  f = GoodFields();
  f[3] = "x12";
  EXPECT_EQ(error(f), "field 4 (I3) is 'x12', not an integer");
  f = GoodFields();
  f[13] = "1.5";
  EXPECT_EQ(error(f), "field 14 (I13) is '1.5', not an integer");
  f = GoodFields();
  f[13] = "99999999999999999999";  // beyond int64
  EXPECT_EQ(error(f), "field 14 (I13) is '99999999999999999999', not an integer");
  f = GoodFields();
  f.pop_back();
  EXPECT_NE(error(f).find("has 39 tab-separated fields, not 40"), std::string::npos);
  f = GoodFields();
  f.erase(f.begin());  // a line without its label, as in the Kaggle set's test.txt
  EXPECT_NE(error(f).find("a file without labels"), std::string::npos) << error(f);
  EXPECT_NE(error({""}).find("has 1 tab-separated fields"), std::string::npos);
}

TEST(CriteoReaderTest, ReadsAFileAndNamesItsBadLineOrSkipsIt) {
  TestDir dir("criteo_reader");
  const std::string path = (dir.path() / "train.txt").string();
  std::vector<std::string> zero = GoodFields();
  zero[0] = "0";
  std::vector<std::string> bad = GoodFields();
  bad[5] = "five";
  std::ofstream(path) << Line(GoodFields()) << "\n"
                      << Line(zero) << "\n"
                      << Line(bad) << "\n"
                      << Line(GoodFields());  // no newline at the end
  auto strict = ReadCriteoFile(path, "criteo/train.txt", {}, nullptr);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(
      strict.status().message(),
      path + ":3: field 6 (I5) is 'five', not an integer (--skip-bad-lines skips such lines)");

  CriteoReadStats stats;
  ASSERT_OK_AND_ASSIGN(const Dataset d,
                       ReadCriteoFile(path, "criteo/train.txt", {.skip_bad_lines = true}, &stats));
  EXPECT_EQ(stats.lines, 4);
  EXPECT_EQ(stats.skipped, 1);
  EXPECT_EQ(stats.first_skipped, "line 3: field 6 (I5) is 'five', not an integer");
  EXPECT_EQ(d.labels, (std::vector<int32_t>{1, 0, 1}));
  EXPECT_EQ(d.example_shape, Shape{13});
  EXPECT_EQ(d.fields, 26);
  EXPECT_EQ(d.num_classes, 2);
  EXPECT_EQ(d.values.size(), 3u * 13);
  EXPECT_EQ(d.ids.size(), 3u * 26);
  EXPECT_OK(d.Validate());

  // The same lines as a stream, a chunk at a time: what it skipped goes to its Notes.
  ASSERT_OK_AND_ASSIGN(auto stream, CriteoStream::Open(path, {.skip_bad_lines = true}));
  Dataset chunk;
  EXPECT_EQ(stream->Notes(), "");
  ASSERT_OK_AND_ASSIGN(int64_t n, stream->Read(2, &chunk));
  EXPECT_EQ(n, 2);
  ASSERT_OK_AND_ASSIGN(n, stream->Read(2, &chunk));
  EXPECT_EQ(n, 1);
  ASSERT_OK_AND_ASSIGN(n, stream->Read(2, &chunk));
  EXPECT_EQ(n, 0);
  EXPECT_EQ(chunk.labels, d.labels);
  EXPECT_EQ(chunk.ids, d.ids);
  EXPECT_EQ(stream->Notes(), path +
                                 ": skipped 1 malformed line(s) of 4 (--skip-bad-lines); the "
                                 "first, line 3: field 6 (I5) is 'five', not an integer");

  EXPECT_EQ(ReadCriteoFile((dir.path() / "none.txt").string(), "x", {}, nullptr).status().code(),
            StatusCode::kNotFound);
  const std::string empty = (dir.path() / "empty.txt").string();
  std::ofstream(empty) << "";
  EXPECT_NE(ReadCriteoFile(empty, "x", {}, nullptr).status().message().find("no examples"),
            std::string::npos);
}

TEST(CriteoReaderTest, TheStockDatasetReadsTrainAndTestFromDataDir) {
  TestDir dir("criteo_dataset");
  std::ofstream(dir.path() / "train.txt") << Line(GoodFields()) << "\n" << Line(GoodFields());
  const Registry registry = StockRegistry();
  ASSERT_OK_AND_ASSIGN(const DatasetDef* def, registry.FindDataset("criteo"));
  DataRequest request;
  request.data_dir = dir.path().string();
  // test.txt is missing: the probe names it before anything is loaded.
  Result<DatasetInfo> info = def->probe(request);
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("test.txt: cannot open"), std::string::npos);
  std::ofstream(dir.path() / "test.txt") << Line(GoodFields()) << "\n";
  ASSERT_OK_AND_ASSIGN(info, def->probe(request));
  EXPECT_EQ(info->example_shape, Shape{13});
  EXPECT_EQ(info->fields, 26);
  EXPECT_EQ(info->num_classes, 2);
  ASSERT_OK_AND_ASSIGN(const DataSplits d, def->load(request));
  EXPECT_EQ(d.train.size(), 2);
  EXPECT_EQ(d.test.size(), 1);
  EXPECT_EQ(d.train.name, "criteo/train.txt");
  // log(1 + x) is the whole preprocessing, as in DLRM.
  EXPECT_EQ(d.preprocessing.mean, std::vector<float>{0.0f});
  EXPECT_EQ(d.preprocessing.stddev, std::vector<float>{1.0f});
  EXPECT_NE(def->load({}).status().message().find("needs --data-dir"), std::string::npos);
}

}  // namespace
}  // namespace towerps::worker
