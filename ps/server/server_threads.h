// How many threads (shards) a server runs: --threads N, or auto.
//
// Contract: free functions; thread-safe.
#ifndef TOWERPS_PS_SERVER_SERVER_THREADS_H_
#define TOWERPS_PS_SERVER_SERVER_THREADS_H_

#include <string>

#include "towerps/result.h"

namespace towerps::ps {

// The cores this process may run on (its affinity mask: a cpuset, Slurm's or mpirun's binding).
int UsableCores();
// --threads auto: half of those cores (the other half left to the host's workers), shared by
// the servers on the host, 1 to 8 each; 1 on a 2-core machine. A server alone does not know
// its neighbours (1); towerps-launch, starting every server on one machine, divides.
int AutoServerThreads(int servers_on_host = 1);
// A --threads value: "auto" or 1 to 256; kInvalidArgument naming `flag` otherwise.
Result<int> ParseServerThreads(const std::string& text, const std::string& flag);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SERVER_THREADS_H_
