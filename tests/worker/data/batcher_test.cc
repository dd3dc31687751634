// Batcher: sharding, per-epoch shuffling, normalization, crops and flips, remainders, bad options,
// multi-hot fields; and the synthetic datasets it is usually fed in benchmarks.
#include "worker/data/batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "tests/testing/status_assert.h"
#include "worker/data/categorical.h"
#include "worker/data/synthetic.h"

namespace towerps::worker {
namespace {

// n examples of [c, h, w]; pixel (ch, y, x) of example i is (i + 10 * ch + 3 * y + x) % 256 and
// its label is i % 10.
Dataset Ramp(int n, int c, int h, int w) {
  Dataset d;
  d.name = "ramp";
  d.example_shape = {c, h, w};
  for (int i = 0; i < n; ++i) {
    d.labels.push_back(static_cast<uint8_t>(i % 10));
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          d.pixels.push_back(static_cast<uint8_t>((i + 10 * ch + 3 * y + x) % 256));
  }
  return d;
}

// Recovers the example index from a batch entry of a Ramp dataset (pixel 0 = i % 256, no crop).
std::vector<int> ExampleIds(const Batch& b, int64_t example_size) {
  std::vector<int> ids;
  for (int i = 0; i < b.size; ++i)
    ids.push_back(static_cast<int>(std::lround(b.x[i * example_size] * 255.0f)));
  return ids;
}

TEST(BatcherTest, WorkersTogetherSeeEveryExampleOncePerEpoch) {
  const Dataset d = Ramp(103, 1, 2, 2);
  for (int workers : {1, 3}) {
    for (int64_t epoch : {0, 1}) {
      std::multiset<int> seen;
      for (int rank = 0; rank < workers; ++rank) {
        auto b = Batcher::Create(&d, {.batch_size = 10,
                                      .seed = 5,
                                      .rank = rank,
                                      .num_workers = workers,
                                      .drop_remainder = false});
        ASSERT_TRUE(b.ok()) << b.status().ToString();
        (*b)->StartEpoch(epoch);
        Batch batch;
        while ((*b)->Next(&batch)) {
          for (int id : ExampleIds(batch, 4)) seen.insert(id);
          for (int i = 0; i < batch.size; ++i) {
            EXPECT_EQ(batch.labels[i], ExampleIds(batch, 4)[i] % 10);
          }
        }
      }
      ASSERT_EQ(seen.size(), 103u) << workers << " workers, epoch " << epoch;
      for (int i = 0; i < 103; ++i) EXPECT_EQ(seen.count(i), 1u) << i;
    }
  }
}

TEST(BatcherTest, ShuffleDependsOnSeedAndEpochOnly) {
  const Dataset d = Ramp(200, 1, 2, 2);
  auto order = [&](uint64_t seed, int64_t epoch) -> std::vector<int> {
    auto b = Batcher::Create(&d, {.batch_size = 200, .seed = seed});
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok()) return {};
    (*b)->StartEpoch(epoch);
    Batch batch;
    EXPECT_TRUE((*b)->Next(&batch));
    return ExampleIds(batch, 4);
  };
  EXPECT_EQ(order(1, 0), order(1, 0));
  EXPECT_NE(order(1, 0), order(1, 1));
  EXPECT_NE(order(1, 0), order(2, 0));
  std::vector<int> identity(200);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(order(1, 0), identity);
}

TEST(BatcherTest, DropRemainderAndCounts) {
  const Dataset d = Ramp(25, 1, 2, 2);
  ASSERT_OK_AND_ASSIGN(auto b, Batcher::Create(&d, {.batch_size = 10}));
  EXPECT_EQ(b->batches_per_epoch(), 2);
  Batch batch;
  int batches = 0;
  while (b->Next(&batch)) ++batches;
  EXPECT_EQ(batches, 2);
  ASSERT_OK_AND_ASSIGN(auto all, Batcher::Create(&d, {.batch_size = 10, .drop_remainder = false}));
  EXPECT_EQ(all->batches_per_epoch(), 3);
  int last = 0;
  while (all->Next(&batch)) last = batch.size;
  EXPECT_EQ(last, 5);
}

TEST(BatcherTest, NormalizesPerChannelAndCentreCrops) {
  const Dataset d = Ramp(1, 2, 6, 6);
  ASSERT_OK_AND_ASSIGN(auto b, Batcher::Create(&d, {.batch_size = 1,
                                                    .shuffle = false,
                                                    .mean = {0.1f, 0.2f},
                                                    .stddev = {0.5f, 0.25f},
                                                    .crop_h = 4,
                                                    .crop_w = 2}));
  EXPECT_EQ(b->example_shape(), (Shape{2, 4, 2}));
  Batch batch;
  ASSERT_TRUE(b->Next(&batch));
  // Centre crop of 6x6 to 4x2 starts at (1, 2). Channel 1, row 3, col 1 -> source (4, 3).
  const float pixel = static_cast<float>(10 * 1 + 3 * 4 + 3);
  EXPECT_FLOAT_EQ(batch.x[8 + 3 * 2 + 1], (pixel / 255.0f - 0.2f) / 0.25f);
}

TEST(BatcherTest, RandomCropsAndFlipsStayInsideAndVary) {
  const Dataset d = Ramp(50, 3, 8, 8);
  ASSERT_OK_AND_ASSIGN(auto b, Batcher::Create(&d, {.batch_size = 50,
                                                    .shuffle = false,
                                                    .crop_h = 5,
                                                    .crop_w = 5,
                                                    .random_crop_flip = true}));
  Batch batch;
  ASSERT_TRUE(b->Next(&batch));
  std::set<int> corners;
  int flipped = 0;
  for (int i = 0; i < 50; ++i) {
    const float* ex = batch.x.data() + i * 75;
    const int v00 = static_cast<int>(std::lround(ex[0] * 255.0f));
    const int v01 = static_cast<int>(std::lround(ex[1] * 255.0f));
    // Along a row the ramp steps by +1, or by -1 when flipped.
    ASSERT_TRUE(v01 - v00 == 1 || v01 - v00 == -1) << v00 << " " << v01;
    flipped += v01 < v00;
    corners.insert((v00 - i + 256) % 256);  // 3 * y0 + x0 (+ 4 when flipped)
  }
  EXPECT_GT(flipped, 5);
  EXPECT_LT(flipped, 45);
  EXPECT_GT(corners.size(), 5u);
}

TEST(BatcherTest, BadOptionsNameTheValue) {
  const Dataset d = Ramp(4, 1, 4, 4);
  auto r = Batcher::Create(&d, {.batch_size = 0});
  EXPECT_NE(r.status().message().find("batch_size 0"), std::string::npos);
  r = Batcher::Create(&d, {.rank = 2, .num_workers = 2});
  EXPECT_NE(r.status().message().find("rank 2"), std::string::npos);
  r = Batcher::Create(&d, {.crop_h = 5, .crop_w = 5});
  EXPECT_NE(r.status().message().find("crop 5x5"), std::string::npos);
  r = Batcher::Create(&d, {.stddev = {0.0f}});
  EXPECT_NE(r.status().message().find("stddev"), std::string::npos);
}

// Example i of a Ramp holds i % 4 multi-hot ids, 1000 * i + j for j < i % 4: the batches' bags
// must be their examples' own, in the shuffled order, with offsets from 0.
TEST(BatcherTest, MultiHotFieldsTravelWithTheirExamples) {
  Dataset d = Ramp(50, 1, 1, 1);
  MultiHotField field{.offsets = {0}, .ids = {}};
  for (uint64_t i = 0; i < 50; ++i) {
    for (uint64_t j = 0; j < i % 4; ++j) field.ids.push_back(1000 * i + j);
    field.offsets.push_back(field.ids.size());
  }
  d.multi_hot = {field};
  ASSERT_OK_AND_ASSIGN(auto batcher, Batcher::Create(&d, {.batch_size = 8, .seed = 3}));
  Batch b;
  int batches = 0;
  while (batcher->Next(&b)) {
    ++batches;
    ASSERT_EQ(b.bags.size(), 1u);
    const Batch::Bag& bag = b.bags[0];
    ASSERT_EQ(bag.offsets.size(), 9u);
    EXPECT_EQ(bag.offsets[0], 0u);
    const std::vector<int> examples = ExampleIds(b, 1);
    for (int k = 0; k < b.size; ++k) {
      const auto i = static_cast<uint64_t>(examples[k]);
      ASSERT_EQ(bag.offsets[k + 1] - bag.offsets[k], i % 4) << "example " << i;
      for (uint32_t u = bag.offsets[k]; u < bag.offsets[k + 1]; ++u) {
        EXPECT_EQ(bag.ids[u], 1000 * i + (u - bag.offsets[k]));
      }
    }
    const TableInput input{.bag = 0};
    EXPECT_EQ(TableIds(b, input), bag.ids);
    EXPECT_EQ(BagOffsets(b, input), bag.offsets.data());
    EXPECT_EQ(BagOffsets(b, {}), nullptr);
  }
  EXPECT_EQ(batches, 6);
}

TEST(BatcherTest, MalformedMultiHotFieldsAreNamed) {
  Dataset d = Ramp(3, 1, 1, 1);
  d.multi_hot = {{.offsets = {0, 1, 2}, .ids = {5, 6}}};  // 3 examples need 4 offsets
  EXPECT_NE(d.Validate().message().find("multi-hot field 0 needs 4 offsets"), std::string::npos);
  d.multi_hot = {{.offsets = {0, 2, 1, 2}, .ids = {5, 6}}};
  EXPECT_NE(d.Validate().message().find("example 1's ids end at 1, before they start (2)"),
            std::string::npos);
  d.multi_hot = {{.offsets = {0, 1, 2, 2}, .ids = {5, 6, 7}}};
  EXPECT_NE(d.Validate().message().find("offsets end at 2 but it holds 3 ids"), std::string::npos);
  d.multi_hot = {{.offsets = {0, 1, 2, 3}, .ids = {5, 6, 7}}};
  EXPECT_OK(d.Validate());
}

// The categorical generator's multi-hot fields: 0 to max_bag ids each, from their own id range,
// seeded.
TEST(CategoricalTest, MultiHotFieldsAreSeededAndInRange) {
  const CategoricalOptions o{.size = 500, .fields = 2, .multi_hot = 2, .vocabulary = 100};
  ASSERT_OK_AND_ASSIGN(Dataset a, MakeCategoricalDataset(o));
  ASSERT_OK_AND_ASSIGN(Dataset again, MakeCategoricalDataset(o));
  EXPECT_OK(a.Validate());
  ASSERT_EQ(a.multi_hot.size(), 2u);
  std::set<uint64_t> lengths;
  for (size_t m = 0; m < 2; ++m) {
    const MultiHotField& f = a.multi_hot[m];
    EXPECT_EQ(f.ids, again.multi_hot[m].ids);
    for (size_t i = 0; i + 1 < f.offsets.size(); ++i)
      lengths.insert(f.offsets[i + 1] - f.offsets[i]);
    for (uint64_t id : f.ids) {
      EXPECT_GE(id, (2 + m) * 100);
      EXPECT_LT(id, (3 + m) * 100);
    }
  }
  EXPECT_EQ(lengths, (std::set<uint64_t>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(a.labels, again.labels);
  EXPECT_NE(MakeCategoricalDataset({.multi_hot = -1}).status().message().find("multi-hot"),
            std::string::npos);
}

// The most frequent id of field 0 over examples [begin, end) of `d`.
uint64_t ModeOfField0(const Dataset& d, int64_t begin, int64_t end) {
  std::map<uint64_t, int> count;
  for (int64_t e = begin; e < end; ++e) ++count[d.ids[static_cast<size_t>(e * d.fields)]];
  return std::max_element(count.begin(), count.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

// Drift: the popular ids move along the stream, D vocabularies by its end (the test split's),
// always within each field's vocabulary; no drift leaves the bytes as they were.
TEST(CategoricalTest, DriftMovesThePopularIdsAlongTheStream) {
  CategoricalOptions o{.size = 8000, .fields = 2, .vocabulary = 1000};
  ASSERT_OK_AND_ASSIGN(Dataset still, MakeCategoricalDataset(o));
  o.drift = 0.75;
  o.stream_size = 10000;  // this split, then a test split of 2000
  ASSERT_OK_AND_ASSIGN(Dataset drifting, MakeCategoricalDataset(o));
  EXPECT_EQ(ModeOfField0(still, 0, 1000), ModeOfField0(still, 7000, 8000));
  EXPECT_EQ(ModeOfField0(still, 0, 1000), 0u);  // rank 1 of field 0
  EXPECT_LT(ModeOfField0(drifting, 0, 1000), 80u);
  // At examples 7000 to 8000, 0.7 to 0.8 of the stream: rank 1 is id 525 to 600.
  EXPECT_GE(ModeOfField0(drifting, 7000, 8000), 520u);
  EXPECT_LT(ModeOfField0(drifting, 7000, 8000), 600u);
  o.size = 2000;
  o.stream_offset = 8000;
  o.seed = 2;
  ASSERT_OK_AND_ASSIGN(Dataset test, MakeCategoricalDataset(o));
  EXPECT_GE(ModeOfField0(test, 0, 2000), 600u);           // the stream's end: 0.8 to 1.0
  for (uint64_t id : drifting.ids) EXPECT_LT(id, 2000u);  // each field's ids stay its own
  o.drift = -1;
  EXPECT_NE(MakeCategoricalDataset(o).status().message().find("drift in [0, 1000] (-1"),
            std::string::npos);
}

TEST(SyntheticTest, SeededAndInRange) {
  ASSERT_OK_AND_ASSIGN(auto a,
                       MakeSyntheticDataset({.size = 100, .example_shape = {3, 8, 8}, .seed = 7}));
  ASSERT_OK_AND_ASSIGN(auto b,
                       MakeSyntheticDataset({.size = 100, .example_shape = {3, 8, 8}, .seed = 7}));
  ASSERT_OK_AND_ASSIGN(auto c,
                       MakeSyntheticDataset({.size = 100, .example_shape = {3, 8, 8}, .seed = 8}));
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.pixels, c.pixels);
  EXPECT_EQ(a.pixels.size(), 100u * 192);
  std::set<int> classes(a.labels.begin(), a.labels.end());
  EXPECT_EQ(classes.size(), 10u);
  EXPECT_LT(*classes.rbegin(), 10);
  EXPECT_FALSE(MakeSyntheticDataset({.size = 0}).ok());
}

}  // namespace
}  // namespace towerps::worker
