#include "ps/client/client_requests.h"

#include <random>

namespace towerps::ps {

RequestBook::RequestBook() : next_id_(static_cast<uint64_t>(std::random_device{}()) << 32) {}

std::optional<PendingRequest> RequestBook::Take(uint64_t id, int server) {
  auto it = pending_.find(id);
  if (it == pending_.end() || it->second.server != server) return std::nullopt;
  PendingRequest r = std::move(it->second);
  pending_.erase(it);
  return r;
}

std::vector<PendingRequest> RequestBook::Expire() {
  std::vector<PendingRequest> expired;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (!it->second.deadline.expired()) {
      ++it;
      continue;
    }
    expired.push_back(std::move(it->second));
    it = pending_.erase(it);
  }
  return expired;
}

std::vector<PendingRequest> RequestBook::TakeAllAt(int server) {
  std::vector<PendingRequest> taken;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.server != server) {
      ++it;
      continue;
    }
    taken.push_back(std::move(it->second));
    it = pending_.erase(it);
  }
  return taken;
}

std::vector<PendingRequest> RequestBook::TakeAll() {
  std::vector<PendingRequest> taken;
  for (auto& [id, r] : pending_) taken.push_back(std::move(r));
  pending_.clear();
  return taken;
}

std::vector<bool> RequestBook::Owing(int servers) const {
  std::vector<bool> owes(static_cast<size_t>(servers), false);
  for (const auto& [id, r] : pending_) owes[static_cast<size_t>(r.server)] = true;
  return owes;
}

Deadline RequestBook::Earliest(Deadline wait) const {
  for (const auto& [id, r] : pending_) wait = wait.Earlier(r.deadline);
  return wait;
}

}  // namespace towerps::ps
