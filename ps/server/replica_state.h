// A holder's whole replicated state on the wire (--ps-replicas 2): what a primary sends a
// joining backup (Header.replicaState and its tensors), and its checked reading there; and the
// replicate message every forward to a backup is. Which servers hold which groups is
// job/replica_placement.h; the forwards are ps/server/shard.h's.
//
// Contract: free functions on values; thread-safe.
#ifndef TOWERPS_PS_SERVER_REPLICA_STATE_H_
#define TOWERPS_PS_SERVER_REPLICA_STATE_H_

#include "common/message.h"
#include "job/job_config.h"
#include "job/placement.h"
#include "ps/server/holder_state.h"
#include "towerps/result.h"

namespace towerps::ps {

// A replicate message from a server for the chunk or table partition of `spec`, carrying `op`.
OutgoingMessage NewReplicateMessage(const ChunkSpec& spec, proto::ReplicaOp op);

// Adds `state` to a replicate message: Header.replicaState and its tensors (see the schema).
void AddReplicaState(const ChunkState& state, OutgoingMessage* msg);
// Reads a replicate message's state for `spec`, checking every count and size against it and
// the job (slots of its optimizer, worker ranks): a bad one is kProtocol, never a crash.
Result<ChunkState> ReadReplicaState(const IncomingMessage& msg, const ChunkSpec& spec,
                                    const JobConfig& job);
// The same for a table partition's state (ps/server/table_chunk.h). Its tensors: the rows' ids,
// values and state, and update counts; with a previous version, the ids and values of the rows its
// last update changed; then per pending push not refused, in rank order, its ids, gradient rows
// and pulled update counts. TableChunk::Restore checks the rows against the partition.
void AddTableReplicaState(const TableState& state, OutgoingMessage* msg);
Result<TableState> ReadTableReplicaState(const IncomingMessage& msg, const ChunkSpec& spec,
                                         const JobConfig& job);

// Either kind: the state a holder saved (Holder::Save), and the one a replicate message
// carries for the holder of `spec` (a table's partition or a chunk, by spec.is_table()).
void AddHolderState(const HolderState& state, OutgoingMessage* msg);
Result<HolderState> ReadHolderState(const IncomingMessage& msg, const ChunkSpec& spec,
                                    const JobConfig& job);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_REPLICA_STATE_H_
