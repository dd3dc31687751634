// Pre-start checks of a job whose processes all run on this machine (towerps-launch's local
// mode). They run before any process starts, so a mistake ends the launch with exit status 2
// and a message naming the option, rather than a server started for nothing and a worker that
// fails:
//  - every --towers device exists here, as each worker will see it (worker::ParseTowers with
//    --device-count and --allow-soft-placement, the rules the worker applies; the launcher's
//    CUDA_VISIBLE_DEVICES share for a worker always holds the GPUs its towers name, or all
//    there are);
//  - each server's port is free on --bind: with --base-port, base-port + r for every server r
//    is bound and closed again (with SO_REUSEADDR, as ZeroMQ binds); without it, --bind itself
//    is checked on a free port.
// The data directory is checked by ValidateLaunchOptions with LaunchOptions::all_local.
//
// Contract: free functions; the sockets they open are closed before they return. A port that
// is taken between this check and the server's start is still reported by the server.
// Errors are kInvalidArgument naming the option and the value.
#ifndef TOWERPS_LAUNCH_LOCAL_CHECKS_H_
#define TOWERPS_LAUNCH_LOCAL_CHECKS_H_

#include <string>
#include <vector>

#include "launch/launch_options.h"
#include "towerps/result.h"

namespace towerps::launch {

// Both checks below, for `options`.
Status CheckLocalJob(const LaunchOptions& options);

// Every tower of `worker` exists on this machine.
Status CheckTowersHere(const worker::WorkerOptions& worker);

// `servers` ports from `base_port` are free on `bind` (base_port 0: --bind can be listened on).
// A --bind that is not an address or host name (a ZeroMQ interface name) is left to the servers.
Status CheckPortsFree(const std::string& bind, int base_port, int servers);

// `n` distinct TCP ports that were free on the loopback interface a moment ago (for servers
// that must know each other's endpoints before they start: --ps-replicas 2).
Result<std::vector<int>> PickFreePorts(int n);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_LOCAL_CHECKS_H_
