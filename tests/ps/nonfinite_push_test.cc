// Non-finite gradients across processes: real towerps-server processes and clients as workers
// (tests/ps/two_variable_job.h). A gradient with a NaN or an infinity is refused, named and
// counted, and still counts as its worker's push; the client checks a gradient as it sends it
// and says so (Header.finite), so that the server reads only those it was not told are finite.
#include <gtest/gtest.h>

#include <limits>

#include "tests/ps/cluster.h"
#include "tests/ps/two_variable_job.h"

namespace towerps::ps {
namespace {

using testing::Cluster;
using testing::Connect;
using testing::Get;
using testing::Job;
using testing::Model;
using testing::PullAll;
using testing::Random;
using testing::Workers;

class NonFinitePushTest : public testing::ClusterTest {};

// A diverged worker's gradient (NaN, infinity) is refused with an error naming the worker, the
// variable and the chunk; the values stay as they were, the refusal is counted, and the push
// still counts, so that the others are not left waiting.
TEST_F(NonFinitePushTest, NonFiniteGradientIsRefusedCountedAndLeavesTheValuesUnchanged) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kAsync, 2, 1), "nonfinite");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 2);
  const std::vector<float> before = PullAll(*w.clients[0], 1, 0);
  Tensor bad = Random(Model()[1].shape, 5);
  bad.f32()[42] = std::numeric_limits<float>::infinity();
  const Result<PushReport> refused =
      w.clients[1]->Push({.variable_id = 1, .version = 0, .clock = 0, .gradient = bad}).get();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find(
                "worker 1's gradient for variable 1 chunk 0 has inf at element 42: refused"),
            std::string::npos)
      << refused.status().message();
  int64_t version = -1;
  EXPECT_EQ(PullAll(*w.clients[0], 1, 0, &version), before);  // bit for bit
  EXPECT_EQ(version, 1);
  ServerStatsReport st = Get(w.clients[0]->Stats(0));
  EXPECT_EQ(st.nonfinite_rejected, 1u);
  EXPECT_EQ(st.updates_applied, 0u);
  // Logged once, naming the worker; the server goes on serving.
  EXPECT_NE(cluster_->Log(0).find("worker 1's gradient for variable 1 chunk 0 has inf"),
            std::string::npos)
      << cluster_->Log(0);
  Get(w.clients[0]->Push(
      {.variable_id = 1, .version = 1, .clock = 1, .gradient = Random(Model()[1].shape, 6)}));
  EXPECT_NE(PullAll(*w.clients[0], 1, 2), before);
  EXPECT_TRUE(cluster_->server(0).running());
}

// The client reads a gradient for a NaN or an infinity as it sends it, where the values were just
// written, and tells the server (Header.finite), which then does not read it again: only the
// gradient with an infinity is read on the server, and refused there, naming the worker.
TEST_F(NonFinitePushTest, OnlyGradientsTheSenderFoundNonFiniteAreReadForItOnTheServer) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kAsync, 1, 1), "finite_checks");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 1);
  for (int64_t step = 0; step < 3; ++step) {
    Get(w.clients[0]->Push({.variable_id = 1,
                            .version = step,
                            .clock = step,
                            .gradient = Random(Model()[1].shape, 20 + static_cast<int>(step))}));
  }
  ServerStatsReport st = Get(w.clients[0]->Stats(0));
  EXPECT_EQ(st.updates_applied, 3u);
  EXPECT_EQ(st.finite_checks, 0u);
  Tensor bad = Random(Model()[1].shape, 30);
  bad.f32()[3] = -std::numeric_limits<float>::infinity();
  const Result<PushReport> refused =
      w.clients[0]->Push({.variable_id = 1, .version = 3, .clock = 3, .gradient = bad}).get();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find(
                "worker 0's gradient for variable 1 chunk 0 has -inf at element 3: refused"),
            std::string::npos)
      << refused.status().message();
  st = Get(w.clients[0]->Stats(0));
  EXPECT_EQ(st.finite_checks, 1u);
  EXPECT_EQ(st.nonfinite_rejected, 1u);
  EXPECT_EQ(st.updates_applied, 3u);
}

TEST_F(NonFinitePushTest, SyncStepCompletesWithoutTheRefusedGradient) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 1), "nonfinite_sync");
  ASSERT_TRUE(cluster_->ok());
  Workers w = Connect(*cluster_, 2);
  Tensor bad = Random(Model()[1].shape, 7);
  bad.f32()[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(
      w.clients[1]->Push({.variable_id = 1, .version = 0, .clock = 0, .gradient = bad}).get().ok());
  const Tensor good = Random(Model()[1].shape, 8);
  Get(w.clients[0]->Push({.variable_id = 1, .version = 0, .clock = 0, .gradient = good}));
  int64_t version = -1;
  const std::vector<float> got = PullAll(*w.clients[1], 1, 1, &version);  // no hang
  EXPECT_EQ(version, 1);
  for (size_t i = 0; i < got.size(); ++i) {  // worker 0's gradient alone, SGD at lr 0.5
    ASSERT_EQ(got[i], w.initial[1].f32()[i] - 0.5f * good.f32()[i]) << i;
  }
}

}  // namespace
}  // namespace towerps::ps
