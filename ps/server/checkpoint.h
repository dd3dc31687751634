// Checkpoint files: one per server, "<dir>/ps-<rank>.ckpt", holding that server's chunks and
// table partitions with their versions and optimizer state.
//
// Format (little-endian): "TOWERPS" and the format's version byte, a header record, the chunk
// records, for each table partition a table record followed by its rows in records of at most
// kRowsPerRecord rows (ids, update counts, last updates, values and optimizer state) and of
// its ids pending admission, and an end marker. Every record is followed by its CRC-32 (zlib).
// The header names the job's options (those a resumed job must share:
// JobConfig::ResumableFields), the model signature, the server rank and count, the partition
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
};

struct Checkpoint {
  CheckpointMeta meta;
  std::vector<ChunkState> chunks;
  std::vector<TableState> tables;  // table partitions (ps/server/table_chunk.h)
};

std::string CheckpointPath(const std::string& dir, int server_rank);

Status SaveCheckpoint(const std::string& path, const Checkpoint& checkpoint);
Result<Checkpoint> LoadCheckpoint(const std::string& path);
// What LoadCheckpoint does once the file is open: reads and validates the `size` bytes of `in`
// (from its start), naming `name` in errors. Memory grows with the bytes read, never with what a
// record declares beyond `size`.
Result<Checkpoint> ReadCheckpoint(std::istream& in, uint64_t size, const std::string& name);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_CHECKPOINT_H_
