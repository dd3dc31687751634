// How many threads (shards) a server runs: --threads N, or auto.
//
// Contract: free functions; thread-safe.
#ifndef TOWERPS_PS_SERVER_THREADS_H_
#define TOWERPS_PS_SERVER_THREADS_H_

#include <string>

#include "towerps/result.h"

namespace towerps::ps {

// --threads auto: half this host's cores (the other half left to its workers), 1 to 8; 1 on a
// 2-core machine.
int AutoServerThreads();
// A --threads value: "auto" or 1 to 256; kInvalidArgument naming `flag` otherwise.
Result<int> ParseServerThreads(const std::string& text, const std::string& flag);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_THREADS_H_
