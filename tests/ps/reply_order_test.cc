// ReplyOrder: the worker that shares the server's cores is answered last, and nothing else
// changes the order the shards produced.
#include "ps/server/reply_order.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace towerps::ps {
namespace {

// A machine whose processes run where `cpus` says: pid 0 (the server's own thread) and each
// worker's pid, named by routing id in `pids`.
struct Machine {
  std::map<std::string, pid_t> pids;
  std::map<pid_t, ReplyOrder::Cpus> cpus;
  ReplyOrder Order() {
    return ReplyOrder([this](const std::string& peer) { return pids.count(peer) ? pids[peer] : 0; },
                      [this](pid_t pid) -> std::optional<ReplyOrder::Cpus> {
                        if (!cpus.count(pid)) return std::nullopt;
                        return cpus[pid];
                      });
  }
};

// Replies to `peers` in order, each numbered by its request id.
std::vector<OutgoingMessage> Replies(const std::vector<std::string>& peers) {
  std::vector<OutgoingMessage> out;
  for (size_t i = 0; i < peers.size(); ++i) {
    OutgoingMessage m(proto::MessageType::PUSH);
    m.set_peer(peers[i]);
    m.header().setRequestId(i);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<uint64_t> Ids(std::vector<OutgoingMessage>& replies) {
  std::vector<uint64_t> ids;
  for (OutgoingMessage& m : replies) ids.push_back(m.header().getRequestId());
  return ids;
}

TEST(ReplyOrderTest, TheWorkerBoundToTheServersCoreIsAnsweredLast) {
  // --bind-cores on 2 cores: server 0 and worker 0 on core 0, worker 1 on core 1.
  Machine m{.pids = {{"worker:0", 100}, {"worker:1", 101}},
            .cpus = {{0, {0}}, {100, {0}}, {101, {1}}}};
  ReplyOrder order = m.Order();
  std::vector<OutgoingMessage> replies = Replies({"worker:0", "worker:1", "worker:0"});
  order.Arrange(replies);
  EXPECT_EQ(Ids(replies), (std::vector<uint64_t>{1, 0, 2}));  // worker 0's keep their order
  std::vector<OutgoingMessage> already = Replies({"worker:1", "worker:0"});
  order.Arrange(already);
  EXPECT_EQ(Ids(already), (std::vector<uint64_t>{0, 1}));
}

TEST(ReplyOrderTest, WithEveryProcessUnboundOrTheServerOnEveryCoreNothingMoves) {
  Machine unbound{.pids = {{"worker:0", 100}, {"worker:1", 101}},
                  .cpus = {{0, {0, 1}}, {100, {0, 1}}, {101, {0, 1}}}};
  ReplyOrder all_share = unbound.Order();
  std::vector<OutgoingMessage> replies = Replies({"worker:0", "worker:1"});
  all_share.Arrange(replies);
  EXPECT_EQ(Ids(replies), (std::vector<uint64_t>{0, 1}));
  // The server may run on core 1 too, where worker 0 cannot follow it.
  Machine server_free{.pids = unbound.pids, .cpus = {{0, {0, 1}}, {100, {0}}, {101, {1}}}};
  ReplyOrder none_share = server_free.Order();
  replies = Replies({"worker:0", "worker:1"});
  none_share.Arrange(replies);
  EXPECT_EQ(Ids(replies), (std::vector<uint64_t>{0, 1}));
}

TEST(ReplyOrderTest, APeerOfUnknownProcessOrCoresGoesFirstAndARestartIsReadAgain) {
  // worker:2 is on another host (no pid); worker:3's cores cannot be read.
  Machine m{.pids = {{"worker:0", 100}, {"worker:3", 103}}, .cpus = {{0, {0}}, {100, {0}}}};
  ReplyOrder order = m.Order();
  std::vector<OutgoingMessage> replies = Replies({"worker:0", "worker:2", "worker:3"});
  order.Arrange(replies);
  EXPECT_EQ(Ids(replies), (std::vector<uint64_t>{1, 2, 0}));
  // worker:0 restarts as pid 200, now on core 1: it no longer shares the server's core.
  m.pids["worker:0"] = 200;
  m.cpus[200] = {1};
  m.cpus[101] = {0};
  m.pids["worker:1"] = 101;
  replies = Replies({"worker:1", "worker:0"});
  order.Arrange(replies);
  EXPECT_EQ(Ids(replies), (std::vector<uint64_t>{1, 0}));
}

TEST(ReplyOrderTest, AffinityIsReadFromTheSystem) {
  const std::optional<ReplyOrder::Cpus> mine = ReplyOrder::AffinityOf(0);
  ASSERT_TRUE(mine.has_value());
  EXPECT_TRUE(mine->count(sched_getcpu())) << "this thread runs on a CPU of its own affinity";
  EXPECT_EQ(ReplyOrder::AffinityOf(getpid()), mine);
  EXPECT_FALSE(ReplyOrder::AffinityOf(-1).has_value());
}

}  // namespace
}  // namespace towerps::ps
