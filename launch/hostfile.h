// Hostfiles for `towerps-launch --hostfile FILE`, and where each process of a job goes.
//
// Format, one host per line (blank lines and text after '#' are ignored):
//   node1 slots=4            any role
//   node2 slots=2 servers    parameter servers only
//   node3 slots=8 workers    workers only
// A slot is one process. Servers are spread over the hosts that take them first (round-robin,
// one per host per round, in file order); then workers fill the free slots of the hosts that
// take them, host by host. A worker's local rank (its index among the workers on its host) picks
// its GPU there.
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
