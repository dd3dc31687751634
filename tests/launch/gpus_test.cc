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

}  // namespace
}  // namespace towerps::launch
