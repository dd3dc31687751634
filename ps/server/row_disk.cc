#include "ps/server/row_disk.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/options.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "common/logging.h"

namespace towerps::ps {
namespace {

static_assert(std::endian::native == std::endian::little,
              "disk records are little-endian: the tier stores rows as they are in memory");

constexpr size_t kKeyBytes = 16;  // variable (4), partition (4), id (8)

rocksdb::Options TierOptions(int64_t cache_mb, int64_t write_buffer_mb) {
  rocksdb::Options o;
  o.create_if_missing = true;
  o.write_buffer_size = static_cast<size_t>(write_buffer_mb) << 20;
  o.max_write_buffer_number = 2;
  o.compression = rocksdb::kNoCompression;  // trained floats do not compress
  o.max_open_files = 512;
  o.max_background_jobs = 1;             // the server's cores are the shards'
  o.avoid_flush_during_shutdown = true;  // the next Open clears the tier anyway
  // Reads and writes are of single rows, by whole key: the memtable is a hash of keys (the
  // "prefix" is the whole 16-byte key), so a spill's insert and a miss's lookup cost no walk of a
  // skip list holding every row spilled lately (a third more rows a second with the tier at a
  // 0.957 hit rate, docs/PERFORMANCE.md); the flush sorts it, on RocksDB's thread. Scans (a
  // dump, a checkpoint) ask for the total order. A memtable Bloom filter answers "not here".
  o.prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(kKeyBytes));
  o.memtable_factory.reset(rocksdb::NewHashSkipListRepFactory(1 << 16));
  o.allow_concurrent_memtable_write = false;  // one writer at a time: the shards' writes queue
  o.memtable_whole_key_filtering = true;
  o.memtable_prefix_bloom_size_ratio = 0.1;
  rocksdb::BlockBasedTableOptions t;
  t.block_cache = rocksdb::NewLRUCache(static_cast<size_t>(cache_mb) << 20);
  t.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));  // a miss costs no read
  t.cache_index_and_filter_blocks = true;                    // inside the cache's budget
  o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
  return o;
}

rocksdb::WriteOptions NoLog() {
  rocksdb::WriteOptions w;
  w.disableWAL = true;  // the tier is rebuilt from a checkpoint, never recovered
  return w;
}

void PutBigEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetBigEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

// Puts the files of the tier checkpoint `from` in the empty directory `dir`: its table files
// hard-linked (never written again, by either), the rest (the manifest, which the new tier
// appends to) copied. A file that can be neither is kIoError naming it.
Status StartFrom(const std::string& from, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(fs::path(from) / "CURRENT", ec)) {
    return NotFoundError("the disk tier's checkpoint " + from +
                         " is missing or incomplete (no CURRENT file); restore the whole "
                         "--checkpoint-dir, or remove its ps-*.ckpt files to start afresh");
  }
  fs::create_directories(dir, ec);
  for (const fs::directory_entry& entry : fs::directory_iterator(from, ec)) {
    const fs::path to = fs::path(dir) / entry.path().filename();
    ec.clear();
    if (entry.path().extension() == ".sst") fs::create_hard_link(entry.path(), to, ec);
    if (entry.path().extension() != ".sst" || ec) {
      ec.clear();
      fs::copy_file(entry.path(), to, fs::copy_options::overwrite_existing, ec);
    }
    if (ec) {
      return IoError("cannot bring " + entry.path().string() + " into the disk tier " + dir + ": " +
                     ec.message());
    }
  }
  if (ec) return IoError("cannot list the disk tier's checkpoint " + from + ": " + ec.message());
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<RowDisk>> RowDisk::Open(const std::string& dir, int64_t cache_mb,
                                               int64_t write_buffer_mb, const std::string& from) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return InvalidArgumentError("--table-dir: cannot create the disk tier's directory " + dir +
                                " (" + ec.message() + "); give a writable directory");
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    return InvalidArgumentError("--table-dir: the disk tier's directory " + dir +
                                " is not writable; give a writable directory");
  }
  const rocksdb::Options options = TierOptions(cache_mb, write_buffer_mb);
  // An earlier process's tier is never reopened (see the header).
  rocksdb::Status destroyed = rocksdb::DestroyDB(dir, options);
  if (!destroyed.ok()) {
    return InvalidArgumentError("--table-dir: cannot clear the disk tier in " + dir +
                                " (is another server using it? each job needs its own "
                                "--table-dir): " +
                                destroyed.ToString());
  }
  if (!from.empty()) TOWERPS_RETURN_IF_ERROR(StartFrom(from, dir));
  rocksdb::DB* db = nullptr;
  rocksdb::Status opened = rocksdb::DB::Open(options, dir, &db);
  if (!opened.ok()) {
    return InvalidArgumentError("--table-dir: cannot open a RocksDB disk tier in " + dir + ": " +
                                opened.ToString());
  }
  return std::unique_ptr<RowDisk>(new RowDisk(dir, std::unique_ptr<rocksdb::DB>(db)));
}

Result<std::unique_ptr<RowDisk>> RowDisk::OpenReadOnly(const std::string& dir) {
  rocksdb::DB* db = nullptr;
  rocksdb::Options options = TierOptions(8, 1);
  options.create_if_missing = false;
  rocksdb::Status opened = rocksdb::DB::OpenForReadOnly(options, dir, &db);
  if (!opened.ok()) {
    return NotFoundError("cannot read the disk tier's checkpoint " + dir + ": " +
                         opened.ToString());
  }
  return std::unique_ptr<RowDisk>(new RowDisk(dir, std::unique_ptr<rocksdb::DB>(db)));
}

Status RowDisk::Checkpoint(const std::string& dir) const {
  rocksdb::Checkpoint* made = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &made);
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(made);
  // log_size_for_flush 0: the memtables are always flushed (the tier writes no log).
  if (s.ok()) s = checkpoint->CreateCheckpoint(dir, /*log_size_for_flush=*/0);
  if (!s.ok()) {
    return IoError("cannot write the disk tier's checkpoint " + dir + " (from " + dir_ +
                   "): " + s.ToString());
  }
  return Status::Ok();
}

RowDisk::RowDisk(std::string dir, std::unique_ptr<rocksdb::DB> db)
    : dir_(std::move(dir)), db_(std::move(db)) {}

RowDisk::~RowDisk() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (reader_.joinable()) reader_.join();
  if (db_) db_->Close().PermitUncheckedError();
}

void RowDisk::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    if (!reader_.joinable()) reader_ = std::thread([this] { ReaderLoop(); });
  }
  wake_.notify_one();
}

void RowDisk::ReaderLoop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, with every task done
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

uint64_t RowDisk::bytes_on_disk() const {
  uint64_t sst = 0, mem = 0;
  db_->GetIntProperty(rocksdb::DB::Properties::kLiveSstFilesSize, &sst);
  db_->GetIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &mem);
  return sst + mem;
}

void RowDisk::Fail(const char* what, const std::string& error) const {
  TOWERPS_LOG(kError) << "the disk tier in " << dir_ << " failed to " << what << ": " << error
                      << "; the server stops (free space on that disk, or give another "
                         "--table-dir, then resume the job from its --checkpoint-dir)";
  std::fflush(stderr);
  std::_Exit(1);
}

DiskRows::DiskRows(RowDisk* disk, uint32_t variable, uint32_t partition, int64_t stride)
    : disk_(disk), prefix_(uint64_t{variable} << 32 | partition), stride_(stride) {}

std::string DiskRows::Key(uint64_t id) const {
  std::string key;
  key.reserve(kKeyBytes);
  PutBigEndian(prefix_, 8, &key);
  PutBigEndian(id, 8, &key);
  return key;
}

std::string DiskRows::End() const {
  std::string end;
  PutBigEndian(prefix_ + 1, 8, &end);  // the next partition's first key
  return end;
}

DiskRow DiskRows::Decode(const char* data, size_t size, std::vector<float>* values) const {
  const size_t floats = static_cast<size_t>(stride_) * sizeof(float);
  if (size != floats + sizeof(uint32_t) + sizeof(int64_t)) {
    disk_->Fail("read a row", "a record of " + std::to_string(size) + " bytes where rows take " +
                                  std::to_string(floats + 12));
  }
  values->resize(static_cast<size_t>(stride_));
  std::memcpy(values->data(), data, floats);
  DiskRow row{.values = values->data()};
  std::memcpy(&row.updates, data + floats, sizeof(uint32_t));
  std::memcpy(&row.last_update, data + floats + sizeof(uint32_t), sizeof(int64_t));
  return row;
}

void DiskRows::Read(const uint64_t* ids, size_t n,
                    const std::function<void(size_t, const DiskRow&)>& found, bool serving) const {
  if (n == 0 || size_ == 0) return;
  const size_t hits = Fetch(ids, n, found);
  counts_.reads += static_cast<int64_t>(n);
  if (serving) counts_.hits += static_cast<int64_t>(hits);
}

size_t DiskRows::Fetch(const uint64_t* ids, size_t n,
                       const std::function<void(size_t, const DiskRow&)>& found) const {
  if (n == 0) return 0;
  std::vector<std::string> keys(n);
  std::vector<rocksdb::Slice> slices(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = Key(ids[i]);
    slices[i] = keys[i];
  }
  std::vector<rocksdb::PinnableSlice> values(n);
  std::vector<rocksdb::Status> statuses(n);
  rocksdb::DB* db = disk_->db();
  const bool sorted = std::is_sorted(ids, ids + n);  // big-endian keys sort as the ids do
  db->MultiGet(rocksdb::ReadOptions(), db->DefaultColumnFamily(), n, slices.data(), values.data(),
               statuses.data(), sorted);
  std::vector<float> buffer;
  size_t hits = 0;
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) disk_->Fail("read a row", statuses[i].ToString());
    ++hits;
    found(i, Decode(values[i].data(), values[i].size(), &buffer));
  }
  return hits;
}

void DiskRows::Write(const std::vector<uint64_t>& ids, const std::vector<DiskRow>& rows,
                     int64_t replacing) {
  if (ids.empty()) return;
  rocksdb::WriteBatch batch;
  const size_t floats = static_cast<size_t>(stride_) * sizeof(float);
  std::string value(floats + sizeof(uint32_t) + sizeof(int64_t), '\0');
  for (size_t i = 0; i < ids.size(); ++i) {
    std::memcpy(value.data(), rows[i].values, floats);
    std::memcpy(value.data() + floats, &rows[i].updates, sizeof(uint32_t));
    std::memcpy(value.data() + floats + sizeof(uint32_t), &rows[i].last_update, sizeof(int64_t));
    batch.Put(Key(ids[i]), value).PermitUncheckedError();
  }
  rocksdb::Status s = disk_->db()->Write(NoLog(), &batch);
  if (!s.ok()) disk_->Fail("write rows", s.ToString());
  size_ += static_cast<int64_t>(ids.size()) - replacing;
  counts_.writes += static_cast<int64_t>(ids.size());
}

void DiskRows::Erase(const std::vector<uint64_t>& ids) {
  if (ids.empty()) return;
  rocksdb::WriteBatch batch;
  for (uint64_t id : ids) batch.Delete(Key(id)).PermitUncheckedError();
  rocksdb::Status s = disk_->db()->Write(NoLog(), &batch);
  if (!s.ok()) disk_->Fail("erase rows", s.ToString());
  size_ -= static_cast<int64_t>(ids.size());
}

void DiskRows::Scan(const std::function<void(uint64_t, const DiskRow&)>& each) const {
  const std::string begin = Key(0);
  const std::string end = End();
  rocksdb::ReadOptions options;
  const rocksdb::Slice upper(end);
  options.iterate_upper_bound = &upper;
  options.fill_cache = false;       // a dump or checkpoint passes once over cold rows
  options.total_order_seek = true;  // across keys: the prefix extractor takes the whole key
  std::unique_ptr<rocksdb::Iterator> it(disk_->db()->NewIterator(options));
  std::vector<float> buffer;
  for (it->Seek(begin); it->Valid(); it->Next()) {
    const rocksdb::Slice key = it->key();
    const rocksdb::Slice value = it->value();
    each(GetBigEndian(key.data() + 8, 8), Decode(value.data(), value.size(), &buffer));
  }
  if (!it->status().ok()) disk_->Fail("scan rows", it->status().ToString());
}

void DiskRows::Clear() {  // even when none are counted: a tier opened from a checkpoint
  rocksdb::DB* db = disk_->db();
  rocksdb::Status s = db->DeleteRange(NoLog(), db->DefaultColumnFamily(), Key(0), End());
  if (!s.ok()) disk_->Fail("clear rows", s.ToString());
  size_ = 0;
}

void DiskRows::Recount() {
  int64_t n = 0;
  Scan([&n](uint64_t, const DiskRow&) { ++n; });
  size_ = n;
}

}  // namespace towerps::ps
