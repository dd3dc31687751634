// Replication (--ps-replicas 2): which server processes hold which chunks, and how a chunk's
// whole state travels to a joining backup.
//
// Chunks are placed on `servers` replica groups exactly as without replicas (ps/placement.h);
// group g is the set of chunks whose home is server g. With two replicas group g is held by its
// home and by server (g + 1) mod P, P = JobConfig::ServerProcesses(): with --servers 1 a standby
// server 1 holds the backups of everything and is the primary of nothing until a failover.
// One of the two is the group's primary (at start, the home); the other its backup. The
// primary forwards what changes a chunk, in the order it applies it (the init; a sync step's sum
// of gradients; an async/SSP push), and the backup applies it through the same Chunk code, so
// both hold the same bits (ps/shard.h).
//
// Contract: free functions on values; thread-safe.
#ifndef TOWERPS_PS_REPLICA_SET_H_
#define TOWERPS_PS_REPLICA_SET_H_

#include <vector>

#include "common/message.h"
#include "ps/holder_state.h"
#include "ps/job_config.h"
#include "ps/placement.h"

namespace towerps::ps {

// Starts the error a promoted backup answers its old primary's forwards with; a primary that
// reads it was replaced (its workers thought it dead) and must stop serving (ps/server.h).
inline constexpr char kDeposedMarker[] = "this server became the primary of";

// Starts the error a backup answers a worker's request with; the worker then sends the group to
// the other replica (ps/client_impl.h).
inline constexpr char kNotPrimaryMarker[] = "this server holds the backup of";

// The servers holding group g: {home, other}; {home} without replicas.
std::vector<int> ReplicasOf(const JobConfig& job, int group);
// The server other than `server` holding group g; -1 without replicas.
int OtherReplica(const JobConfig& job, int group, int server);
// The groups `server` holds a replica of, home first.
std::vector<int> GroupsHeldBy(const JobConfig& job, int server);

// Adds `state` to a replicate message: Header.replicaState and its tensors (see the schema).
void AddReplicaState(const ChunkState& state, OutgoingMessage* msg);
// Reads a replicate message's state for `spec`, checking every count and size against it and
// the job (slots of its optimizer, worker ranks): a bad one is kProtocol, never a crash.
Result<ChunkState> ReadReplicaState(const IncomingMessage& msg, const ChunkSpec& spec,
                                    const JobConfig& job);
// The same for a table partition's state (ps/table_chunk.h). Its tensors: the rows' ids, values
// and state, and update counts; with a previous version, the ids and values of the rows its
// last update changed; then per pending push not refused, in rank order, its ids, gradient rows
// and pulled update counts. TableChunk::Restore checks the rows against the partition.
void AddTableReplicaState(const TableState& state, OutgoingMessage* msg);
Result<TableState> ReadTableReplicaState(const IncomingMessage& msg, const ChunkSpec& spec,
                                         const JobConfig& job);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_REPLICA_SET_H_
