#include "ps/client/replica_router.h"

#include "job/replica_placement.h"

namespace towerps::ps {

ReplicaRouter::ReplicaRouter(const JobConfig& job, int servers)
    : ReplicaRouter(job, servers, SilenceLimits{}) {}

ReplicaRouter::ReplicaRouter(const JobConfig& job, int servers, SilenceLimits limits)
    : job_(job),
      route_(static_cast<size_t>(job.servers)),
      incarnations_(static_cast<size_t>(servers), 0),
      silent_since_(static_cast<size_t>(servers)),
      unresponsive_(static_cast<size_t>(servers), false),
      last_heard_(static_cast<size_t>(servers)),
      limits_(limits) {
  for (size_t g = 0; g < route_.size(); ++g) route_[g] = static_cast<int>(g);
}

void ReplicaRouter::Claim(int server, const std::vector<int>& groups) {
  for (int g : groups) {
    if (g >= 0 && g < static_cast<int>(route_.size())) route_[static_cast<size_t>(g)] = server;
  }
}

bool ReplicaRouter::Heard(int server, uint64_t incarnation) {
  const auto s = static_cast<size_t>(server);
  silent_since_[s].reset();  // it is alive
  unresponsive_[s] = false;
  last_heard_[s] = Deadline::Clock::now();
  if (incarnation == 0) return false;
  const bool restarted = incarnations_[s] != 0 && incarnations_[s] != incarnation;
  incarnations_[s] = incarnation;
  return restarted;
}

std::optional<ReplicaRouter::Probe> ReplicaRouter::ProbeDue(const std::vector<bool>& owes) {
  if (!next_probe_.expired()) return std::nullopt;
  next_probe_ = Deadline::After(kProbeInterval);
  Probe probe;
  for (size_t s = 0; s < silent_since_.size(); ++s) {
    if (!owes[s]) {
      silent_since_[s].reset();
      continue;
    }
    if (!silent_since_[s]) silent_since_[s] = Deadline::Clock::now();
    probe.ping.push_back(static_cast<int>(s));
  }
  for (size_t s = 0; s < silent_since_.size(); ++s) {
    const auto limit = last_heard_[s] ? limits_.heard : limits_.never_heard;
    if (replicated() && silent_since_[s] && Deadline::Clock::now() - *silent_since_[s] >= limit) {
      probe.silent.push_back(static_cast<int>(s));
    }
  }
  return probe;
}

std::set<int> ReplicaRouter::FailOver(int server) {
  silent_since_[static_cast<size_t>(server)].reset();
  unresponsive_[static_cast<size_t>(server)] = true;
  std::set<int> to;
  for (size_t g = 0; g < route_.size(); ++g) {
    if (route_[g] != server) continue;
    route_[g] = OtherReplica(job_, static_cast<int>(g), server);
    to.insert(route_[g]);
  }
  return to;
}

int ReplicaRouter::NotPrimary(int server, int group) {
  if (route_[static_cast<size_t>(group)] != server) return -1;
  const int other = OtherReplica(job_, group, server);
  route_[static_cast<size_t>(group)] = other;
  return other;
}

}  // namespace towerps::ps
