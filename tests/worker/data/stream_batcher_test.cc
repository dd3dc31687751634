// StreamBatcher: a split read from a stream through a shuffle buffer. Example i of the test
// streams has feature 0 = i, so a batch names its examples. Every worker's share of every
// epoch, exactly once; an order seeded by (seed, epoch, rank) and reproduced by Seek; memory
// bounded by the buffer; normalization from the counting pass; ids, multi-hot fields and targets
// with their examples; a split that changes or breaks is named.
#include "worker/data/stream_batcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "tests/testing/status_assert.h"

namespace towerps::worker {
namespace {

// n examples of 2 features (i and 1), label i % 3, 1 id (1000 + i) and a multi-hot field of
// i % 3 ids (i, i, ...); or targets 0.5 i instead of labels. Reads chunks of 5, and fails at
// example `fail_at` (-1: never).
class FakeStream : public ExampleStream {
 public:
  FakeStream(int64_t n, bool targets, int64_t fail_at) : n_(n), targets_(targets), fail_(fail_at) {}
  Result<int64_t> Read(int64_t max, Dataset* chunk) override {
    chunk->example_shape = {2};
    chunk->num_classes = 3;
    chunk->fields = 1;
    if (chunk->multi_hot.empty()) chunk->multi_hot.push_back({.offsets = {0}, .ids = {}});
    int64_t k = 0;
    for (; k < std::min<int64_t>(max, 5) && next_ < n_; ++k, ++next_) {
      if (next_ == fail_) return IoError("fake: example " + std::to_string(next_) + " is broken");
      const auto i = static_cast<uint64_t>(next_);
      chunk->values.insert(chunk->values.end(), {static_cast<float>(i), 1.0f});
      if (targets_) {
        chunk->targets.push_back(0.5f * static_cast<float>(i));
      } else {
        chunk->labels.push_back(static_cast<int32_t>(i % 3));
      }
      chunk->ids.push_back(1000 + i);
      MultiHotField& bag = chunk->multi_hot[0];
      for (uint64_t j = 0; j < i % 3; ++j) bag.ids.push_back(i);
      bag.offsets.push_back(bag.ids.size());
    }
    return k;
  }

 private:
  int64_t n_, next_ = 0;
  bool targets_;
  int64_t fail_;
};

StreamOpener Opener(int64_t n, bool targets = false, int64_t fail_at = -1) {
  return [=]() -> Result<std::unique_ptr<ExampleStream>> {
    return std::unique_ptr<ExampleStream>(new FakeStream(n, targets, fail_at));
  };
}

BatcherOptions Options(int rank, int workers, int batch = 4) {
  return {.batch_size = batch,
          .seed = 7,
          .rank = rank,
          .num_workers = workers,
          .drop_remainder = false,
          .mean = {0.0f},  // x as read: feature 0 is the example's index
          .stddev = {1.0f}};
}

std::vector<int> EpochOrder(StreamBatcher& b, int64_t epoch) {
  b.StartEpoch(epoch);
  std::vector<int> order;
  Batch batch;
  while (b.Next(&batch)) {
    for (int k = 0; k < batch.size; ++k) order.push_back(static_cast<int>(batch.x[k * 2]));
  }
  EXPECT_OK(b.status());
  return order;
}

TEST(StreamBatcherTest, WorkersTogetherSeeEveryExampleOncePerEpoch) {
  for (int64_t buffer : {1, 7, 1000}) {
    std::vector<int> all;
    for (int rank = 0; rank < 3; ++rank) {
      ASSERT_OK_AND_ASSIGN(auto b,
                           StreamBatcher::Create(Opener(103), Options(rank, 3), buffer, "s"));
      EXPECT_EQ(b->examples(), 103);
      const std::vector<int> order = EpochOrder(*b, 1);
      EXPECT_EQ(static_cast<int64_t>(order.size()), b->shard_size());
      for (int i : order) EXPECT_EQ(i % 3, rank) << "example " << i << " is another worker's";
      all.insert(all.end(), order.begin(), order.end());
      EXPECT_LE(b->peak_buffered(), buffer);
    }
    std::sort(all.begin(), all.end());
    std::vector<int> want(103);
    for (int i = 0; i < 103; ++i) want[i] = i;
    EXPECT_EQ(all, want) << "buffer " << buffer;
  }
}

TEST(StreamBatcherTest, OrderDependsOnSeedEpochAndRankAndSeekReproducesIt) {
  ASSERT_OK_AND_ASSIGN(auto a, StreamBatcher::Create(Opener(60), Options(0, 1), 10, "s"));
  ASSERT_OK_AND_ASSIGN(auto b, StreamBatcher::Create(Opener(60), Options(0, 1), 10, "s"));
  const std::vector<int> e0 = EpochOrder(*a, 0), e1 = EpochOrder(*a, 1);
  EXPECT_EQ(EpochOrder(*b, 0), e0);
  EXPECT_NE(e0, e1);
  std::vector<int> sorted = e0;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_NE(sorted, e0) << "not shuffled";
  // With a buffer of 10 the k-th draw can only take an example among the first k + 10 read.
  for (size_t k = 0; k < e0.size(); ++k) EXPECT_LT(e0[k] - static_cast<int>(k), 10);
  BatcherOptions other = Options(0, 1);
  other.seed = 8;
  ASSERT_OK_AND_ASSIGN(auto c, StreamBatcher::Create(Opener(60), other, 10, "s"));
  EXPECT_NE(EpochOrder(*c, 0), e0);
  // Seek(k) gives the k-th batch of the stream epoch 0, epoch 1, ... (15 batches an epoch).
  std::vector<std::vector<float>> sequential;
  Batch batch;
  a->StartEpoch(0);
  for (int k = 0; k < 40; ++k) {
    if (!a->Next(&batch)) {
      a->StartEpoch(a->epoch() + 1);
      ASSERT_TRUE(a->Next(&batch));
    }
    sequential.push_back(batch.x);
  }
  for (int k : {0, 7, 15, 22, 39}) {
    b->Seek(k);
    ASSERT_TRUE(b->Next(&batch)) << k;
    EXPECT_EQ(batch.x, sequential[static_cast<size_t>(k)]) << "batch " << k;
  }
  // Without shuffling (the test split), the file's order.
  BatcherOptions in_order = Options(0, 1);
  in_order.shuffle = false;
  ASSERT_OK_AND_ASSIGN(auto d, StreamBatcher::Create(Opener(20), in_order, 10, "s"));
  std::vector<int> want(20);
  for (int i = 0; i < 20; ++i) want[i] = i;
  EXPECT_EQ(EpochOrder(*d, 3), want);
}

TEST(StreamBatcherTest, IdsMultiHotFieldsAndTargetsTravelWithTheirExamples) {
  for (const bool targets : {false, true}) {
    ASSERT_OK_AND_ASSIGN(auto b,
                         StreamBatcher::Create(Opener(30, targets), Options(1, 2, 5), 4, "s"));
    EXPECT_EQ(b->fields(), 1);
    EXPECT_EQ(b->multi_hot(), 1);
    EXPECT_EQ(b->regression(), targets);
    const std::vector<int64_t> counts =
        targets ? std::vector<int64_t>{} : std::vector<int64_t>{10, 10, 10};
    EXPECT_EQ(b->label_counts(), counts);
    b->StartEpoch(0);
    Batch batch;
    int seen = 0;
    while (b->Next(&batch)) {
      const Batch::Bag& bag = batch.bags.at(0);
      ASSERT_EQ(bag.offsets.size(), static_cast<size_t>(batch.size) + 1);
      for (int k = 0; k < batch.size; ++k, ++seen) {
        const auto i = static_cast<uint64_t>(batch.x[k * 2]);
        EXPECT_EQ(batch.ids[k], 1000 + i);
        if (targets) {
          EXPECT_EQ(batch.targets[k], 0.5f * static_cast<float>(i));
        } else {
          EXPECT_EQ(batch.labels[k], static_cast<int32_t>(i % 3));
        }
        ASSERT_EQ(bag.offsets[k + 1] - bag.offsets[k], i % 3);
        for (uint32_t u = bag.offsets[k]; u < bag.offsets[k + 1]; ++u) EXPECT_EQ(bag.ids[u], i);
      }
    }
    EXPECT_EQ(seen, 15);
  }
}

TEST(StreamBatcherTest, NormalizationComesFromTheCountingPassWhenNoneIsGiven) {
  BatcherOptions o = Options(0, 1);
  o.mean.clear();
  o.stddev.clear();
  ASSERT_OK_AND_ASSIGN(auto b, StreamBatcher::Create(Opener(11), o, 3, "s"));
  // Feature 0 is 0..10: mean 5, stddev sqrt(10); feature 1 is constant: mean 1, stddev 1.
  ASSERT_EQ(b->options().mean.size(), 2u);
  EXPECT_FLOAT_EQ(b->options().mean[0], 5.0f);
  EXPECT_FLOAT_EQ(b->options().stddev[0], std::sqrt(10.0f));
  EXPECT_FLOAT_EQ(b->options().mean[1], 1.0f);
  EXPECT_FLOAT_EQ(b->options().stddev[1], 1.0f);
  b->StartEpoch(0);
  Batch batch;
  ASSERT_TRUE(b->Next(&batch));
  EXPECT_FLOAT_EQ(batch.x[1], 0.0f);
}

TEST(StreamBatcherTest, BrokenOrChangedSplitsAndBadOptionsAreNamed) {
  EXPECT_NE(StreamBatcher::Create(Opener(30, false, 12), Options(0, 1), 4, "s")
                .status()
                .message()
                .find("example 12 is broken"),
            std::string::npos);
  EXPECT_NE(StreamBatcher::Create(Opener(30), Options(0, 1), 0, "s")
                .status()
                .message()
                .find("--shuffle-buffer 0"),
            std::string::npos);
  EXPECT_NE(StreamBatcher::Create(Opener(0), Options(0, 1), 4, "s")
                .status()
                .message()
                .find("s holds no examples"),
            std::string::npos);
  // Counted at 30; the file then holds 20: the epoch stops, naming the change.
  int opened = 0;
  StreamOpener shrinking = [&]() -> Result<std::unique_ptr<ExampleStream>> {
    return std::unique_ptr<ExampleStream>(new FakeStream(opened++ == 0 ? 30 : 20, false, -1));
  };
  ASSERT_OK_AND_ASSIGN(auto b, StreamBatcher::Create(shrinking, Options(0, 1), 4, "criteo/train"));
  b->StartEpoch(0);
  Batch batch;
  int batches = 0;
  while (b->Next(&batch)) ++batches;
  EXPECT_EQ(batches, 5);
  EXPECT_NE(b->status().message().find("criteo/train ended after 20 examples in epoch 0, but "
                                       "held 30 when the job started"),
            std::string::npos)
      << b->status();
}

}  // namespace
}  // namespace towerps::worker
