// RowDisk: a server's disk tier for embedding tables with storage=rocksdb (job/table_policy.h):
// one RocksDB instance in the server's own directory, <--table-dir>/ps-<rank>, holding the rows
// its table partitions keep out of memory. DiskRows is one partition's view of it.
//
// A record is keyed by (variable id, partition, row id), each big-endian so that a partition's
// records are contiguous and in increasing order of id; its value is the row's floats (values,
// then optimizer state) as they were in memory, its update count and its last update's version,
// little-endian, so a row read back has exactly the bits it was written with.
//
// The tier is a cache of the partition's state, never its record: Open deletes whatever an
// earlier process left in the directory, and a restarted server rebuilds its tier from a
// checkpoint or its replica (TableChunk::Restore), never from a half-written one. So writes skip
// RocksDB's write-ahead log. A full checkpoint keeps the tier as RocksDB's own checkpoint of it
// (Checkpoint: the memtables flushed, the table files hard-linked, ps/server/tier_checkpoint.h);
// a restore opens the tier from such a copy (Open's `from`: its table files hard-linked again,
// so the checkpoint itself is never written to).
//
// Errors: Open's are kInvalidArgument naming the directory (not writable, or in use by another
// server: RocksDB's lock refuses a second one, so a live tier is never cleared); an I/O error
// later (a full disk) ends the process (exit 1) with a message naming the directory and
// RocksDB's error, since a partition cannot apply an update it cannot store: the launcher
// reports the server's exit and the job stops, to be resumed from its checkpoint once there is
// space.
//
// Contract: RowDisk is thread-safe (RocksDB is); its reader thread runs the tasks posted to it
// (Post: the partitions' prefetches, which only read) in order, and is joined, its tasks done,
// before the tier closes. A DiskRows is owned and used by one partition's thread, but for Fetch,
// which any thread may call; the rows it counts are exactly those it wrote and did not erase.
#ifndef TOWERPS_PS_SERVER_ROW_DISK_H_
#define TOWERPS_PS_SERVER_ROW_DISK_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "towerps/result.h"

namespace rocksdb {
class DB;
}  // namespace rocksdb

namespace towerps::ps {

class RowDisk {
 public:
  // Opens a fresh tier in `dir` (created when absent; an earlier tier there is deleted).
  // `cache_mb`: RocksDB's block cache; `write_buffer_mb`: its memtable, both counted in the
  // server's memory beside the tables' budgets.
  // `from` (optional): a checkpoint of a tier (Checkpoint) whose records the new tier starts
  // with; kNotFound naming it when it is not one.
  static Result<std::unique_ptr<RowDisk>> Open(const std::string& dir, int64_t cache_mb = 32,
                                               int64_t write_buffer_mb = 16,
                                               const std::string& from = "");
  // A tier's checkpoint, read only (DiskRows::Scan), as --export-npz reads it.
  static Result<std::unique_ptr<RowDisk>> OpenReadOnly(const std::string& dir);
  ~RowDisk();
  RowDisk(const RowDisk&) = delete;
  RowDisk& operator=(const RowDisk&) = delete;

  const std::string& dir() const { return dir_; }
  // The bytes of the tier's files on disk (RocksDB's estimate of its live SST files and
  // memtables).
  uint64_t bytes_on_disk() const;
  rocksdb::DB* db() const { return db_.get(); }
  // RocksDB's checkpoint of the whole tier in `dir` (which must not exist): the memtables are
  // flushed, then the table files hard-linked (copied when `dir` is on another file system).
  // Errors: kIoError naming `dir`. The caller keeps every writer of the tier still meanwhile.
  Status Checkpoint(const std::string& dir) const;
  // Ends the process, naming the directory, the operation and RocksDB's error (see above).
  [[noreturn]] void Fail(const char* what, const std::string& error) const;
  // Runs `task` on the tier's reader thread (started by the first), after those posted before.
  void Post(std::function<void()> task);

 private:
  RowDisk(std::string dir, std::unique_ptr<rocksdb::DB> db);
  void ReaderLoop();

  const std::string dir_;
  std::unique_ptr<rocksdb::DB> db_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_, as stop_
  bool stop_ = false;
  std::thread reader_;
};

// A row as the disk holds it: `stride` floats, its update count and last update's version.
struct DiskRow {
  const float* values = nullptr;
  uint32_t updates = 0;
  int64_t last_update = 0;
};

// What a partition's tier has done: records looked up (found or not), found, and written.
struct DiskCounts {
  int64_t reads = 0, hits = 0, writes = 0;
};

class DiskRows {
 public:
  DiskRows(RowDisk* disk, uint32_t variable, uint32_t partition, int64_t stride);

  int64_t size() const { return size_; }
  int64_t stride() const { return stride_; }
  const DiskCounts& counts() const { return counts_; }
  // Looks up ids[0, n) (in one batch), calling found(i, row) for each one on disk, in order.
  // `serving`: the rows a lookup or an update asked for (counted as hits when found); false for
  // the tier's own reads (a TTL check), counted as reads only.
  void Read(const uint64_t* ids, size_t n,
            const std::function<void(size_t i, const DiskRow& row)>& found,
            bool serving = true) const;
  // Read on any thread: counts nothing (the partition's thread counts the reads: Counted) and
  // does not ask size(). Returns how many were found.
  size_t Fetch(const uint64_t* ids, size_t n,
               const std::function<void(size_t i, const DiskRow& row)>& found) const;
  void Counted(int64_t reads) const { counts_.reads += reads; }
  RowDisk* disk() const { return disk_; }
  // Writes rows in one batch; `replacing` of them are on disk already (their records are
  // overwritten), the others not.
  void Write(const std::vector<uint64_t>& ids, const std::vector<DiskRow>& rows,
             int64_t replacing = 0);
  // Erases ids that are on disk (Read found them), in one batch.
  void Erase(const std::vector<uint64_t>& ids);
  // Every record, in increasing order of id.
  void Scan(const std::function<void(uint64_t id, const DiskRow& row)>& each) const;
  // Erases every record of the partition.
  void Clear();
  // Counts the partition's records again (size()), after the tier was opened from a checkpoint.
  void Recount();

 private:
  std::string Key(uint64_t id) const;
  std::string End() const;  // past the partition's last key
  // A record's value, checked against the stride (a wrong size is a bug: the process ends).
  DiskRow Decode(const char* data, size_t size, std::vector<float>* values) const;

  RowDisk* const disk_;
  const uint64_t prefix_;  // (variable, partition): a key's first 8 bytes
  const int64_t stride_;
  int64_t size_ = 0;
  mutable DiskCounts counts_;  // Read counts too
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_ROW_DISK_H_
