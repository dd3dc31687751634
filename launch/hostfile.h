// Hostfiles for `towerps-launch --hostfile FILE`, and where each process of a job goes.
//
// Format, one host per line (blank lines and text after '#' are ignored):
//   node1 slots=4            any role
//   node2 slots=2 servers    parameter servers only
//   node3 slots=8 workers    workers only
//   node4:4                  4 slots, as Horovod writes it
//   node5 max_slots=4        as OpenMPI writes it: the most processes the host takes
// A slot is one process; a host without a count has 1. No host gets more processes than its
// slots (max_slots= caps slots=, and stands in for it when slots= is absent). `-H host1:4,
// host2:4` (horovodrun's form) lists the same as a hostfile of "host1:4" and "host2:4". Servers are
// spread over the hosts that take them first (round-robin, one per host per round, in file order);
// then workers fill the free slots of the hosts that take them, host by host. A worker's local rank
// (its index among the workers on its host) picks its GPU there.
//
// Contract: pure functions. Errors are kInvalidArgument naming the file and line, or saying how
// many slots are missing for which role.
#ifndef TOWERPS_LAUNCH_HOSTFILE_H_
#define TOWERPS_LAUNCH_HOSTFILE_H_

#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps::launch {

struct HostEntry {
  enum class Takes { kAny, kServers, kWorkers };
  std::string host;
  int slots = 1;
  Takes takes = Takes::kAny;
};

// `where` names the source in errors ("hosts.txt").
Result<std::vector<HostEntry>> ParseHostfile(const std::string& text, const std::string& where);
// A comma-separated "host[:N]" list (towerps-launch -H); `where` names it in errors ("-H").
Result<std::vector<HostEntry>> ParseHostList(const std::string& text, const std::string& where);

struct HostPlacement {
  bool server = false;
  int rank = 0;        // server rank or worker rank
  int local_rank = 0;  // among the workers (or servers) on the same host
  std::string host;
};

// Servers first (by rank), then workers (by rank).
Result<std::vector<HostPlacement>> PlaceOnHosts(const std::vector<HostEntry>& hosts, int servers,
                                                int workers);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_HOSTFILE_H_
