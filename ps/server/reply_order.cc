#include "ps/server/reply_order.h"

#include <sched.h>

#include <algorithm>
#include <utility>

namespace towerps::ps {

ReplyOrder::ReplyOrder(std::function<pid_t(const std::string& peer)> pid_of,
                       std::function<std::optional<Cpus>(pid_t)> cpus_of)
    : pid_of_(std::move(pid_of)), cpus_of_(std::move(cpus_of)), mine_(cpus_of_(0)) {}

std::optional<ReplyOrder::Cpus> ReplyOrder::AffinityOf(pid_t pid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(pid, sizeof(set), &set) != 0) return std::nullopt;
  Cpus cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.insert(c);
  }
  return cpus;
}

bool ReplyOrder::SharesMyCores(const std::string& peer) {
  const pid_t pid = pid_of_(peer);
  if (pid <= 0 || !mine_ || mine_->empty()) return false;
  Known& known = peers_[peer];
  if (known.pid != pid) {
    const std::optional<Cpus> theirs = cpus_of_(pid);
    known = {.pid = pid,
             .shares = theirs &&
                       std::includes(theirs->begin(), theirs->end(), mine_->begin(), mine_->end())};
  }
  return known.shares;
}

void ReplyOrder::Arrange(std::vector<OutgoingMessage>& replies) {
  if (replies.size() < 2) return;
  std::stable_partition(replies.begin(), replies.end(),
                        [this](const OutgoingMessage& m) { return !SharesMyCores(m.peer()); });
}

}  // namespace towerps::ps
