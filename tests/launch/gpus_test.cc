#include "launch/gpus.h"

#include <gtest/gtest.h>

namespace towerps::launch {
namespace {

TEST(GpusTest, NeededCountsUpToTheHighestGpuNamed) {
  EXPECT_EQ(GpusNeeded("cpu:0"), 0);
  EXPECT_EQ(GpusNeeded("gpu:0"), 1);
  EXPECT_EQ(GpusNeeded("gpu:0,gpu:1"), 2);
  EXPECT_EQ(GpusNeeded("gpu:3"), 4);
  EXPECT_EQ(GpusNeeded("cpu:0,gpu:1"), 2);
  EXPECT_EQ(GpusNeeded("gpu:x"), 0);  // the worker reports the bad list
}

TEST(GpusTest, OneGpuPerWorkerRoundRobin) {
  const std::vector<std::string> ids = {"0", "1", "2", "3"};
  EXPECT_EQ(GpusForRank(0, 1, ids), "0");
  EXPECT_EQ(GpusForRank(3, 1, ids), "3");
  EXPECT_EQ(GpusForRank(5, 1, ids), "1");  // more workers than GPUs: they share
  EXPECT_EQ(GpusForRank(2, 0, ids), "");   // CPU towers get none
  EXPECT_EQ(GpusForRank(0, 1, {}), "");    // no GPU here
}

TEST(GpusTest, SeveralGpusPerWorkerAreDisjointWhileThereAreEnough) {
  const std::vector<std::string> ids = {"4", "5", "6", "7"};  // the user's CUDA_VISIBLE_DEVICES
  EXPECT_EQ(GpusForRank(0, 2, ids), "4,5");
  EXPECT_EQ(GpusForRank(1, 2, ids), "6,7");
  EXPECT_EQ(GpusForRank(2, 2, ids), "4,5");
  EXPECT_EQ(GpusForRank(0, 8, ids), "4,5,6,7");  // asks for more than there is: all of them
}

TEST(GpusTest, WorkersSharingAGpuSplitItsMemory) {
  const std::vector<std::string> one = {"0"}, two = {"0", "1"};
  EXPECT_EQ(SharedGpuFraction(1, 1, one), 0.0);  // alone: the worker's own default
  EXPECT_EQ(SharedGpuFraction(2, 1, two), 0.0);  // a GPU each
  EXPECT_DOUBLE_EQ(SharedGpuFraction(2, 1, one), 0.45);
  EXPECT_DOUBLE_EQ(SharedGpuFraction(3, 1, two), 0.45);  // two on gpu 0, one on gpu 1
  EXPECT_DOUBLE_EQ(SharedGpuFraction(4, 1, one), 0.22);  // rounded down
  EXPECT_DOUBLE_EQ(SharedGpuFraction(3, 2, two), 0.3);   // every worker uses both
  EXPECT_EQ(SharedGpuFraction(4, 0, two), 0.0);          // CPU towers
  EXPECT_EQ(SharedGpuFraction(4, 1, {}), 0.0);           // no GPU here
}

}  // namespace
}  // namespace towerps::launch
