// Client::PushThenPull (Header.thenPull): a push and the next pull in one request per chunk, as
// workers send them. Against real towerps-server processes: the same bits as a push and a pull,
// a reply that waits for the step like a pull does, a refused gradient that still gets the
// values, and push reports (staleness, dropped chunks) as a plain push gives them.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <thread>

#include "tests/ps/cluster.h"

namespace towerps::ps {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::Check;
using testing::Cluster;
using testing::Get;
using testing::Random;

// Variable 0 is cut by the 16 KiB partition into 8 chunks over 2 servers; variable 1 is one.
std::vector<VariableSpec> Model() { return {{"w", {300, 100}}, {"b", {100}}}; }
constexpr uint64_t kSignature = 0x5eed;

JobConfig Job(UpdateMode mode, int workers, int servers) {
  JobConfig j;
  j.mode = mode;
  j.workers = workers;
  j.servers = servers;
  j.partition_bytes = 16384;
  j.optimizer.kind = OptimizerKind::kMomentum;
  j.optimizer.learning_rate = 0.1f;
  j.schedule.kind = LrScheduleKind::kConstant;
  return j;
}

std::vector<float> Values(const PulledVariable& p, uint32_t var) {
  std::vector<float> out(NumElements(Model()[var].shape));
  p.CopyTo(out.data());
  return out;
}

// Registered clients, the chief having initialised both variables.
std::vector<std::unique_ptr<Client>> Connect(const Cluster& cluster, int workers) {
  std::vector<std::unique_ptr<Client>> clients;
  for (int r = 0; r < workers; ++r) {
    clients.push_back(cluster.MakeClient(r));
    Get(clients.back()->Register(Model(), kSignature));
  }
  for (uint32_t v = 0; v < Model().size(); ++v)
    Check(clients[0]->Init(v, Random(Model()[v].shape, 50 + v)));
  return clients;
}

class PushThenPullTest : public testing::ClusterTest {};

// Three sync steps of two workers, each pushing its gradient of variable 0 (8 chunks on 2
// servers) and pulling the next step: separately, combined, and one of each. Every run pulls the
// same bits at every step.
TEST_F(PushThenPullTest, SameBitsAsAPushAndAPullInEveryMix) {
  std::vector<std::vector<std::vector<float>>> runs;  // [mix][step] values after the step
  for (int mix = 0; mix < 3; ++mix) {
    cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 2), "mix" + std::to_string(mix));
    ASSERT_TRUE(cluster_->ok());
    auto clients = Connect(*cluster_, 2);
    std::vector<std::vector<float>> steps;
    for (int64_t step = 0; step < 3; ++step) {
      std::vector<Future<Result<PushReport>>> pushes;
      std::vector<Future<Result<PulledVariable>>> pulls;
      for (int r = 0; r < 2; ++r) {
        const Tensor g = Random(Model()[0].shape, static_cast<uint32_t>(10 * step + r));
        const bool combined = mix == 1 || (mix == 2 && r == 0);
        if (combined) {
          Client::PushAndPull both = clients[r]->PushThenPull(
              {.variable_id = 0, .version = step, .clock = step, .gradient = g},
              {.variable_id = 0, .min_version = step + 1, .clock = step + 1});
          pushes.push_back(std::move(both.push));
          pulls.push_back(std::move(both.pull));
        } else {
          pushes.push_back(
              clients[r]->Push({.variable_id = 0, .version = step, .clock = step, .gradient = g}));
          pulls.push_back(
              clients[r]->Pull({.variable_id = 0, .min_version = step + 1, .clock = step + 1}));
        }
      }
      for (int r = 0; r < 2; ++r) {
        const PushReport rep = Get(std::move(pushes[r]));
        EXPECT_EQ(rep.dropped_chunks, 0);
        const PulledVariable p = Get(std::move(pulls[r]));
        EXPECT_EQ(p.version, step + 1) << "mix " << mix << " worker " << r;
        if (r == 0) {
          steps.push_back(Values(p, 0));
        } else {
          EXPECT_EQ(Values(p, 0), steps.back()) << "the workers pulled different values";
        }
      }
    }
    runs.push_back(steps);
  }
  for (int mix = 1; mix < 3; ++mix) {
    for (size_t step = 0; step < runs[0].size(); ++step) {
      ASSERT_EQ(std::memcmp(runs[mix][step].data(), runs[0][step].data(),
                            runs[0][step].size() * sizeof(float)),
                0)
          << "mix " << mix << " step " << step;
    }
  }
}

// The combined reply is the pull's: it waits for the step, which needs the other worker.
TEST_F(PushThenPullTest, ReplyWaitsForTheStepLikeAPull) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 1), "wait");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 2);
  Client::PushAndPull first = clients[0]->PushThenPull(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 1)},
      {.variable_id = 1, .min_version = 1, .clock = 1});
  EXPECT_EQ(first.pull.wait_for(milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(first.push.wait_for(milliseconds(0)), std::future_status::timeout);
  Client::PushAndPull second = clients[1]->PushThenPull(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 2)},
      {.variable_id = 1, .min_version = 1, .clock = 1});
  EXPECT_EQ(Get(std::move(first.pull)).version, 1);
  EXPECT_EQ(Get(std::move(first.push)).version, 1);
  EXPECT_EQ(Get(std::move(second.pull)).version, 1);
  // A late gradient for the step that has passed: dropped, reported so, and the values come.
  Client::PushAndPull late = clients[1]->PushThenPull(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 3)},
      {.variable_id = 1, .min_version = 1, .clock = 1});
  EXPECT_EQ(Get(std::move(late.push)).dropped_chunks, 1);
  EXPECT_EQ(Get(std::move(late.pull)).version, 1);
}

// A gradient with a NaN fails the push as a plain push's refusal does, and its values still
// come, so a worker that goes on past its divergence is not left without parameters.
TEST_F(PushThenPullTest, RefusedGradientFailsThePushAndStillGetsTheValues) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 1), "refused");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 2);
  const std::vector<float> before =
      Values(Get(clients[0]->Pull({.variable_id = 1, .min_version = 0, .clock = 0})), 1);
  Tensor bad = Random(Model()[1].shape, 4);
  bad.f32()[7] = std::numeric_limits<float>::quiet_NaN();
  Client::PushAndPull refused =
      clients[1]->PushThenPull({.variable_id = 1, .version = 0, .clock = 0, .gradient = bad},
                               {.variable_id = 1, .min_version = 1, .clock = 1});
  const Tensor good = Random(Model()[1].shape, 5);
  Client::PushAndPull taken =
      clients[0]->PushThenPull({.variable_id = 1, .version = 0, .clock = 0, .gradient = good},
                               {.variable_id = 1, .min_version = 1, .clock = 1});
  const Result<PushReport> r = refused.push.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("worker 1's gradient for variable 1 chunk 0 has nan at "
                                      "element 7: refused"),
            std::string::npos)
      << r.status().message();
  const PulledVariable p = Get(std::move(refused.pull));
  EXPECT_EQ(p.version, 1);
  Get(std::move(taken.push));
  // Worker 0's gradient alone, one momentum step from zero velocity: w - lr * g.
  const std::vector<float> after = Values(p, 1);
  for (size_t i = 0; i < after.size(); ++i) ASSERT_EQ(after[i], before[i] - 0.1f * good.f32()[i]);
  EXPECT_EQ(Get(clients[0]->Stats(0)).nonfinite_rejected, 1u);
}

// Async: the push's report carries its staleness, as a plain push's does; SSP-free, so the
// pull for any version comes at once.
TEST_F(PushThenPullTest, AsyncReportsStalenessWithTheValues) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kAsync, 2, 1), "async");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 2);
  Client::PushAndPull a = clients[0]->PushThenPull(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 6)},
      {.variable_id = 1, .min_version = 0, .clock = 1});
  EXPECT_EQ(Get(std::move(a.push)).max_staleness, 0);
  EXPECT_EQ(Get(std::move(a.pull)).version, 1);
  // Computed from version 0, applied at version 1: staleness 1.
  Client::PushAndPull b = clients[1]->PushThenPull(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 7)},
      {.variable_id = 1, .min_version = 0, .clock = 1});
  const PushReport rep = Get(std::move(b.push));
  EXPECT_EQ(rep.max_staleness, 1);
  EXPECT_EQ(rep.mean_staleness, 1.0);
  EXPECT_EQ(Get(std::move(b.pull)).version, 2);
}

// Through shared memory the server reads the gradient where the worker wrote it. The loan ends
// with the step: the reply that completes the call also releases it, so the worker's next
// step can write into the same buffer (a loan held a step longer costs a buffer per step).
TEST_F(PushThenPullTest, ALentGradientIsReleasedWithTheReply) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 1, 1), "loan");
  ASSERT_TRUE(cluster_->ok());
  std::unique_ptr<Client> client =
      cluster_->MakeClient(0, seconds(20), nullptr, TransportPath::kShm);
  Get(client->Register(Model(), kSignature));
  Check(client->Init(1, Random(Model()[1].shape, 9)));
  Tensor grad = client->Allocate(Model()[1].shape);
  std::memcpy(grad.raw_data(), Random(Model()[1].shape, 10).raw_data(), grad.byte_size());
  for (int64_t step = 0; step < 3; ++step) {
    Client::PushAndPull both =
        client->PushThenPull({.variable_id = 1, .version = step, .clock = step, .gradient = grad},
                             {.variable_id = 1, .min_version = step + 1, .clock = step + 1});
    const PulledVariable p = Get(std::move(both.pull));
    Get(std::move(both.push));
    EXPECT_EQ(p.version, step + 1);
    EXPECT_EQ(grad.storage().use_count(), 1) << "step " << step << ": the loan outlived the reply";
  }
  EXPECT_GT(Get(client->Stats(0)).bytes_in, 0u);
}

// A worker gone while its pulls of 8 chunks wait: the step's replies to it are lost, and the
// server's log says so once, not once per chunk (a restart or Ctrl-C printed a burst of them).
TEST_F(PushThenPullTest, RepliesLostToAGoneWorkerAreLoggedOnce) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 2, 1), "lost");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 2);
  auto push = [&](int w) {
    return clients[static_cast<size_t>(w)]->PushThenPull(
        {.variable_id = 0, .version = 0, .clock = 0, .gradient = Random(Model()[0].shape, w)},
        {.variable_id = 0, .min_version = 1, .clock = 1});
  };
  Client::PushAndPull gone = push(1);
  std::this_thread::sleep_for(milliseconds(200));
  clients[1].reset();  // its waiting pulls fail here; the server still holds them
  std::this_thread::sleep_for(milliseconds(300));
  Client::PushAndPull last = push(0);
  EXPECT_EQ(Get(std::move(last.pull)).version, 1);
  std::this_thread::sleep_for(milliseconds(300));
  const std::string log = cluster_->Log(0);
  size_t lines = 0;
  for (size_t at = log.find("reply to worker:1 lost"); at != std::string::npos;
       at = log.find("reply to worker:1 lost", at + 1)) {
    ++lines;
  }
  EXPECT_EQ(lines, 1u) << log;
}

TEST_F(PushThenPullTest, WrongSizeFailsBothWithoutSending) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 1, 1), "size");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 1);
  Client::PushAndPull both = clients[0]->PushThenPull(
      {.variable_id = 1, .version = 0, .clock = 0, .gradient = Random({99}, 8)},
      {.variable_id = 1, .min_version = 1, .clock = 1});
  const Result<PushReport> push = both.push.get();
  const Result<PulledVariable> pull = both.pull.get();
  ASSERT_FALSE(push.ok());
  ASSERT_FALSE(pull.ok());
  EXPECT_EQ(push.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(pull.status().message().find("99 elements, expected 100"), std::string::npos)
      << pull.status().message();
  EXPECT_EQ(Get(clients[0]->Stats(0)).gradients_received, 0u);
}

// A push carries the next pull of its own variable only, never an exact one (the header has no
// field for it), and only of a variable the registered model has: anything else fails both
// calls, naming what was asked, and sends nothing.
TEST_F(PushThenPullTest, APullOfAnotherVariableOrAnExactOneIsRefusedWithoutSending) {
  cluster_ = std::make_unique<Cluster>(Job(UpdateMode::kSync, 1, 1), "mismatch");
  ASSERT_TRUE(cluster_->ok());
  auto clients = Connect(*cluster_, 1);
  const PushRequest push{
      .variable_id = 1, .version = 0, .clock = 0, .gradient = Random(Model()[1].shape, 8)};
  Client::PushAndPull other =
      clients[0]->PushThenPull(push, {.variable_id = 0, .min_version = 1, .clock = 1});
  const Result<PushReport> pushed = other.push.get();
  ASSERT_FALSE(pushed.ok());
  EXPECT_EQ(pushed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(pushed.status().message().find("PushThenPull of variable 1 with a pull of variable 0"),
            std::string::npos)
      << pushed.status().message();
  EXPECT_FALSE(other.pull.get().ok());
  Client::PushAndPull exact = clients[0]->PushThenPull(
      push, {.variable_id = 1, .min_version = 1, .clock = 1, .exact = true});
  const Result<PulledVariable> pulled = exact.pull.get();
  ASSERT_FALSE(pulled.ok());
  EXPECT_NE(pulled.status().message().find("an exact pull"), std::string::npos)
      << pulled.status().message();
  EXPECT_FALSE(exact.push.get().ok());
  // A variable the registered model does not have: both calls fail, naming it.
  Client::PushAndPull unknown = clients[0]->PushThenPull(
      {.variable_id = 7, .version = 0, .clock = 0, .gradient = Random({100}, 8)},
      {.variable_id = 7, .min_version = 1, .clock = 1});
  const Result<PushReport> unknown_push = unknown.push.get();
  ASSERT_FALSE(unknown_push.ok());
  EXPECT_EQ(unknown_push.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown_push.status().message().find(
                "PushThenPull of variable 7, which the registered model does not have"),
            std::string::npos)
      << unknown_push.status().message();
  EXPECT_FALSE(unknown.pull.get().ok());
  EXPECT_EQ(Get(clients[0]->Stats(0)).gradients_received, 0u);
}

}  // namespace
}  // namespace towerps::ps
