// A disk tier's part in a server's checkpoint. A full checkpoint of a server with a disk tier
// (ps/server/row_disk.h) does not copy the tier's rows into its file: the file holds each tiered
// table partition's rows in memory (TableState::on_tier), and beside it the tier is kept as
// RocksDB's own checkpoint, "<dir>/ps-<rank>.tier-<chain>" (its memtables flushed, its table
// files hard-linked: seconds and no copy for a tier of any size). The chain's deltas
// (ps/server/checkpoint_chain.h) hold the rows changed since, from either tier, as before.
//
// The tier checkpoint and the file say the same moment: every shard of the server saves its
// holders, then waits (TierSnapshot) until the last one has, which takes the tier's checkpoint
// while no shard writes to the tier; the file is written after. A restore opens the live tier
// from the tier checkpoint of the chain it loads (RowDisk::Open's `from`), then each partition
// erases the ids its deltas removed and puts the file's rows in, which are never older than the
// tier's records of them (TableRows::Load). So a restored tier holds exactly the rows the
// partition held, bit for bit.
//
// Contract:
//  - TierCheckpointPath: where chain `chain` of server `rank` keeps its tier in `dir`.
//  - RemoveTierCheckpoints: removes server `rank`'s tier checkpoints in `dir` but chain `keep`'s,
//    once that chain's full checkpoint is in place (one left by a failed or interrupted
//    checkpoint goes with them). kIoError names one that cannot be removed.
//  - FillFromTier: for reading a checkpoint without servers (checkpoint_reader.h): adds to each
//    table partition of `ck` kept on the tier the rows its tier checkpoint holds that are neither
//    in the file nor removed since, so that every state is whole. Errors name the tier
//    checkpoint (kNotFound when it is missing).
//  - TierSnapshot: built by the I/O thread for one checkpoint of `shards` shards; each shard
//    calls ArriveAndWait once, after saving its holders; the last arrival takes the tier's
//    checkpoint, and all return once it is taken. status() is read after every shard's part has
//    come back. The wait lasts as long as the slowest shard's turn to its snapshot task; shards
//    never wait for each other otherwise, so it always ends.
#ifndef TOWERPS_PS_SERVER_TIER_CHECKPOINT_H_
#define TOWERPS_PS_SERVER_TIER_CHECKPOINT_H_

#include <barrier>
#include <cstddef>
#include <cstdint>
#include <string>

#include "ps/server/checkpoint.h"
#include "ps/server/row_disk.h"
#include "towerps/result.h"

namespace towerps::ps {

std::string TierCheckpointPath(const std::string& dir, int rank, uint64_t chain);
Status RemoveTierCheckpoints(const std::string& dir, int rank, uint64_t keep);
Status FillFromTier(const std::string& dir, int rank, Checkpoint* ck);
// The tier checkpoint a server restoring `ck` (server `rank`'s, in `dir`; null: none) opens its
// tier from: its chain's, when a table partition in it is kept on the tier; else "" (fresh).
std::string TierToRestore(const Checkpoint* ck, const std::string& dir, int rank);

class TierSnapshot {
 public:
  TierSnapshot(std::ptrdiff_t shards, const RowDisk* disk, std::string path)
      : disk_(disk), path_(std::move(path)), barrier_(shards, Take{this}) {}
  TierSnapshot(const TierSnapshot&) = delete;
  TierSnapshot& operator=(const TierSnapshot&) = delete;

  void ArriveAndWait() { barrier_.arrive_and_wait(); }
  const Status& status() const { return status_; }
  const std::string& path() const { return path_; }

 private:
  struct Take {
    TierSnapshot* self;
    void operator()() noexcept { self->status_ = self->disk_->Checkpoint(self->path_); }
  };
  const RowDisk* const disk_;
  const std::string path_;
  Status status_ = Status::Ok();
  std::barrier<Take> barrier_;
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_TIER_CHECKPOINT_H_
