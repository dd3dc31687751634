// The table requests a server reads (their layout: ps/server/holder.h): a pull's ids, and a
// push's contribution and the ids it pulls next, read from a message and checked against the
// table partition it names. Shared by the shard and the message fuzzer, so that what the fuzzer
// feeds is what a server reads.
//
// Contract: free functions; they read the message, keep shared handles on its payloads (no
// copy) and change nothing. Errors are kInvalidArgument naming the table and what is wrong.
#ifndef TOWERPS_PS_SERVER_TABLE_REQUESTS_H_
#define TOWERPS_PS_SERVER_TABLE_REQUESTS_H_

#include "common/message.h"
#include "ps/server/table_chunk.h"
#include "towerps/result.h"

namespace towerps::ps {

// A pull's ids: one uint64 vector, every id of this partition (and below a bounded table's
// rows), no more rows than one reply frame carries. Any ids for an everyRow pull, which reads
// none.
Result<Tensor> ReadPullIds(const IncomingMessage& msg, const TableChunk& table);

struct RowPush {
  Contribution contribution;  // TableChunk::Push checks its ids and shapes
  Tensor next_ids{};          // thenPull: the ids to pull after it (checked); else undefined
};
// A push's three tensors (ids, gradient rows, pulled update counts), and with thenPull a fourth,
// the ids pulled after it.
Result<RowPush> ReadRowPush(const IncomingMessage& msg, const TableChunk& table);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_TABLE_REQUESTS_H_
