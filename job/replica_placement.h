// Replica placement (--ps-replicas 2): which server processes hold which groups of chunks, and
// the words a server and its clients and launcher use about replicas.
//
// Chunks are placed on `servers` replica groups exactly as without replicas (job/placement.h);
// group g is the set of chunks whose home is server g. With two replicas group g is held by its
// home and by server (g + 1) mod P, P = JobConfig::ServerProcesses(): with --servers 1 a standby
// server 1 holds the backups of everything and is the primary of nothing until a failover.
// One of the two is the group's primary (at start, the home); the other its backup. The
// primary forwards what changes a holder, in the order it applies it, and the backup applies it
// through the same holder code, so both hold the same bits (ps/server/shard.h).
//
// Contract: free functions on values; thread-safe.
#ifndef TOWERPS_JOB_REPLICA_PLACEMENT_H_
#define TOWERPS_JOB_REPLICA_PLACEMENT_H_

#include <vector>

#include "job/job_config.h"

namespace towerps::ps {

// The exit status of a server that stopped because a backup took its place (a primary its
// workers thought dead); a launcher restarts it with --rejoin rather than failing the job.
inline constexpr int kExitReplaced = 75;

// Starts the error a promoted backup answers its old primary's forwards with; a primary that
// reads it was replaced (its workers thought it dead) and must stop serving (ps/server/server.h).
inline constexpr char kDeposedMarker[] = "this server became the primary of";

// Starts the error a backup answers a worker's request with; the worker then sends the group to
// the other replica (ps/client/client_impl.h).
inline constexpr char kNotPrimaryMarker[] = "this server holds the backup of";

// The servers holding group g: {home, other}; {home} without replicas.
std::vector<int> ReplicasOf(const JobConfig& job, int group);
// The server other than `server` holding group g; -1 without replicas.
int OtherReplica(const JobConfig& job, int group, int server);
// The groups `server` holds a replica of, home first.
std::vector<int> GroupsHeldBy(const JobConfig& job, int server);

}  // namespace towerps::ps

#endif  // TOWERPS_JOB_REPLICA_PLACEMENT_H_
