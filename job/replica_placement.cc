#include "job/replica_placement.h"

#include <utility>

namespace towerps::ps {

std::vector<int> ReplicasOf(const JobConfig& job, int group) {
  if (job.ps_replicas < 2) return {group};
  return {group, (group + 1) % job.ServerProcesses()};
}

int OtherReplica(const JobConfig& job, int group, int server) {
  for (int r : ReplicasOf(job, group)) {
    if (r != server) return r;
  }
  return -1;
}

std::vector<int> GroupsHeldBy(const JobConfig& job, int server) {
  std::vector<int> groups;
  for (int g = 0; g < job.servers; ++g) {
    for (int r : ReplicasOf(job, g)) {
      if (r == server) groups.push_back(g);
    }
  }
  // Home first: with two servers, server 1 holds groups 0 and 1.
  if (groups.size() == 2 && groups[1] == server) std::swap(groups[0], groups[1]);
  return groups;
}

}  // namespace towerps::ps
