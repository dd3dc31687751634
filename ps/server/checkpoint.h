// Checkpoint files: one per server, "<dir>/ps-<rank>.ckpt", holding that server's chunks and
// table partitions with their versions and optimizer state; and with incremental checkpoints its
// deltas, "<dir>/ps-<rank>.ckpt.delta-<k>", in the same format (ps/server/checkpoint_chain.h).
//
// Format (little-endian): "TOWERPS" and the format's version byte, a header record, the chunk
// records, for each table partition a table record followed by its rows in records of at most
// kRowsPerRecord rows (ids, update counts, last updates, values and optimizer state), of
// its ids pending admission and, in a delta, of its ids removed; and an end marker. Every record is
// followed by its CRC-32 (zlib). The header names the job's options (those a resumed job must
// share: JobConfig::ResumableFields), the model signature, the server rank and count, the partition
// size and the variable list, so a checkpoint from a different job, model or layout is
// refused, naming what differs, rather than half-loaded.
//
// Contract:
//  - SaveCheckpoint writes to "<path>.tmp" (same directory), fsyncs and closes it, renames it
//    over <path> and fsyncs the directory: a crash leaves either the old or the new checkpoint,
//    never a torn one. A failed create, write, fsync, close or rename (a full disk: ENOSPC)
//    removes the temporary file, leaves <path> as it was, and returns kIoError naming both
//    files, the errno, and for a full disk what to do. A failed directory sync after the rename
//    is kIoError too (the new checkpoint is in place but may not survive a power failure).
//  - LoadCheckpoint validates the whole file (lengths, CRCs, counts) before returning anything;
//    errors are kCorruption or kFailedPrecondition naming the file and the problem.
//  - Thread-compatible; the caller serialises access to one path.
#ifndef TOWERPS_PS_SERVER_CHECKPOINT_H_
#define TOWERPS_PS_SERVER_CHECKPOINT_H_

#include <cstdint>
#include <istream>
#include <string>
#include <utility>
#include <vector>

#include "job/variable.h"
#include "ps/server/holder_state.h"
#include "towerps/result.h"

namespace towerps::ps {

struct CheckpointMeta {
  // ("--lr", "0.05") pairs: the job's JobConfig::ResumableFields() when it was written.
  std::vector<std::pair<std::string, std::string>> job_fields;
  uint64_t model_signature = 0;
  int server_rank = 0;
  int num_servers = 0;
  uint64_t partition_bytes = 0;
  std::vector<VariableSpec> variables;
  // Incremental checkpoints: the full checkpoint that starts chain `chain` has delta 0; delta k
  // (1, 2, ...) of that chain holds what changed since delta k - 1. A file of another chain than
  // its full one's is stale (a crash between writing a full checkpoint and removing the old
  // deltas) and never applied. Format 5 files: chain 0, delta 0.
  uint64_t chain = 0;
  uint32_t delta = 0;
};

struct Checkpoint {
  CheckpointMeta meta;
  std::vector<ChunkState> chunks;
  std::vector<TableState> tables;  // table partitions (ps/server/table_chunk.h)
};

std::string CheckpointPath(const std::string& dir, int server_rank);
// Delta `delta` (>= 1) of server `server_rank`'s chain: "<CheckpointPath>.delta-<delta>".
std::string DeltaPath(const std::string& dir, int server_rank, uint32_t delta);

Status SaveCheckpoint(const std::string& path, const Checkpoint& checkpoint);
Result<Checkpoint> LoadCheckpoint(const std::string& path);
// What LoadCheckpoint does once the file is open: reads and validates the `size` bytes of `in`
// (from its start), naming `name` in errors. Memory grows with the bytes read, never with what a
// record declares beyond `size`.
Result<Checkpoint> ReadCheckpoint(std::istream& in, uint64_t size, const std::string& name);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_CHECKPOINT_H_
