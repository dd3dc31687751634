#include "ps/server/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "ps/server/record_io.h"

namespace towerps::ps {
namespace {

// The last byte is the format version. Version 2 added each variable's kind and decay; version
// 3 replaced the job's fingerprint by its fields, so a mismatch can be named; version 4 added
// tables (each variable's init scale, and the table records); version 5 each row's last update
// and the ids pending admission (PEND records), for the tables' policies; version 6 the chain and
// delta numbers of incremental checkpoints, and a table's changes (its removed ids: REMV records);
// version 7 a table's rows kept in its disk tier's checkpoint (a flag); version 8 a joined
// table's segments. Version 5 is still read.
constexpr char kMagic[8] = {'T', 'O', 'W', 'E', 'R', 'P', 'S', 8};
constexpr int kOldestFormat = 5;
constexpr uint32_t kHeaderTag = 0x48445221;   // "!RDH"
constexpr uint32_t kChunkTag = 0x4b4e4843;    // "CHNK"
constexpr uint32_t kTableTag = 0x4c424154;    // "TABL"
constexpr uint32_t kRowsTag = 0x53574f52;     // "ROWS"
constexpr uint32_t kPendingTag = 0x444e4550;  // "PEND": ids pending admission
constexpr uint32_t kRemovedTag = 0x564d4552;  // "REMV": ids removed since the chain's last file
constexpr int64_t kRowsPerRecord = 65536;
constexpr uint32_t kEndTag = 0x21444e45;  // "END!"
std::string EncodeMeta(const CheckpointMeta& m) {
  Writer w;
  w.Put<uint32_t>(static_cast<uint32_t>(m.job_fields.size()));
  for (const auto& [name, value] : m.job_fields) {
    w.PutString(name);
    w.PutString(value);
  }
  w.Put(m.model_signature);
  w.Put<int32_t>(m.server_rank);
  w.Put<int32_t>(m.num_servers);
  w.Put(m.partition_bytes);
  w.Put<uint32_t>(static_cast<uint32_t>(m.variables.size()));
  for (const VariableSpec& v : m.variables) {
    w.PutString(v.name);
    w.Put<uint8_t>(static_cast<uint8_t>(v.dtype));
    w.Put<uint32_t>(static_cast<uint32_t>(v.shape.size()));
    for (int64_t d : v.shape) w.Put(d);
    w.Put<uint8_t>(static_cast<uint8_t>(v.kind));
    w.Put(v.decay);
    w.Put(v.init_scale);
    w.PutString(v.policy);
    w.Put<uint32_t>(static_cast<uint32_t>(v.segments.size()));
    for (const TableSegment& s : v.segments) {
      w.PutString(s.name);
      w.Put(s.rows);
    }
  }
  w.Put(m.chain);
  w.Put(m.delta);
  return std::move(w.buffer());
}

Status DecodeMeta(const std::string& body, const std::string& path, int format, CheckpointMeta* m) {
  Reader r(body, path);
  uint32_t nvars = 0, nfields = 0;
  TOWERPS_RETURN_IF_ERROR(r.Get(&nfields));
  if (nfields > 1024)
    return CorruptionError(path + ": header record claims " + std::to_string(nfields) +
                           " job fields");
  for (uint32_t i = 0; i < nfields; ++i) {
    std::string name, value;
    TOWERPS_RETURN_IF_ERROR(r.GetString(&name));
    TOWERPS_RETURN_IF_ERROR(r.GetString(&value));
    m->job_fields.emplace_back(std::move(name), std::move(value));
  }
  TOWERPS_RETURN_IF_ERROR(r.Get(&m->model_signature));
  static_assert(sizeof(m->server_rank) == sizeof(int32_t));  // as EncodeMeta writes them
  TOWERPS_RETURN_IF_ERROR(r.Get(&m->server_rank));
  TOWERPS_RETURN_IF_ERROR(r.Get(&m->num_servers));
  TOWERPS_RETURN_IF_ERROR(r.Get(&m->partition_bytes));
  TOWERPS_RETURN_IF_ERROR(r.Get(&nvars));
  for (uint32_t i = 0; i < nvars; ++i) {
    VariableSpec v;
    uint8_t dtype = 0;
    uint32_t rank_dims = 0;
    TOWERPS_RETURN_IF_ERROR(r.GetString(&v.name));
    TOWERPS_RETURN_IF_ERROR(r.Get(&dtype));
    TOWERPS_RETURN_IF_ERROR(r.Get(&rank_dims));
    if (dtype > static_cast<uint8_t>(DType::kUInt32) || rank_dims > 8) {
      return CorruptionError(path + ": variable " + std::to_string(i) + " is malformed");
    }
    v.dtype = static_cast<DType>(dtype);
    v.shape.resize(rank_dims);
    for (auto& d : v.shape) TOWERPS_RETURN_IF_ERROR(r.Get(&d));
    uint8_t kind = 0;
    TOWERPS_RETURN_IF_ERROR(r.Get(&kind));
    TOWERPS_RETURN_IF_ERROR(r.Get(&v.decay));
    TOWERPS_RETURN_IF_ERROR(r.Get(&v.init_scale));
    if (format >= 6) TOWERPS_RETURN_IF_ERROR(r.GetString(&v.policy));
    uint32_t segments = 0;
    if (format >= 8) TOWERPS_RETURN_IF_ERROR(r.Get(&segments));
    if (segments > kMaxTableSegments)
      return CorruptionError(path + ": " + v.name + " is malformed");
    v.segments.resize(segments);
    for (TableSegment& s : v.segments) {
      TOWERPS_RETURN_IF_ERROR(r.GetString(&s.name));
      TOWERPS_RETURN_IF_ERROR(r.Get(&s.rows));
    }
    v.kind = static_cast<VariableKind>(kind);
    if (Status st = ValidateVariableKind(v); !st.ok()) {
      return CorruptionError(path + ": " + std::string(st.message()));
    }
    if (!CheckedNumElements(v.shape).ok()) {
      return CorruptionError(path + ": variable " + v.name + " has an invalid shape");
    }
    m->variables.push_back(std::move(v));
  }
  if (format >= 6) {
    TOWERPS_RETURN_IF_ERROR(r.Get(&m->chain));
    TOWERPS_RETURN_IF_ERROR(r.Get(&m->delta));
  }
  if (!r.done()) return CorruptionError(path + ": header record has trailing bytes");
  return Status::Ok();
}

// Every record's first fields: which holder, its version and update count.
void PutHead(Writer& w, const HolderStateHead& h) {
  w.Put(h.variable_id);
  w.Put(h.chunk_id);
  w.Put(h.version);
  w.Put(h.updates);
}

Status GetHead(Reader& r, HolderStateHead* h) {
  TOWERPS_RETURN_IF_ERROR(r.Get(&h->variable_id));
  TOWERPS_RETURN_IF_ERROR(r.Get(&h->chunk_id));
  TOWERPS_RETURN_IF_ERROR(r.Get(&h->version));
  return r.Get(&h->updates);
}

std::string EncodeChunk(const ChunkState& c) {
  Writer w;
  PutHead(w, c);
  w.Put<uint64_t>(static_cast<uint64_t>(c.values.num_elements()));
  w.Put<uint32_t>(static_cast<uint32_t>(c.slots.size()));
  w.Put<uint32_t>(static_cast<uint32_t>(c.worker_clocks.size()));
  for (int64_t clock : c.worker_clocks) w.Put(clock);
  w.PutBytes(c.values.raw_data(), c.values.byte_size());
  for (const Tensor& s : c.slots) w.PutBytes(s.raw_data(), s.byte_size());
  return std::move(w.buffer());
}

Status DecodeChunk(const std::string& body, const std::string& path, ChunkState* c) {
  Reader r(body, path);
  uint64_t n = 0;
  uint32_t nslots = 0, nclocks = 0;
  TOWERPS_RETURN_IF_ERROR(GetHead(r, c));
  TOWERPS_RETURN_IF_ERROR(r.Get(&n));
  TOWERPS_RETURN_IF_ERROR(r.Get(&nslots));
  TOWERPS_RETURN_IF_ERROR(r.Get(&nclocks));
  // The record's CRC passed and its length is bounded, so these sizes are checked against it.
  if (nslots > 4 || nclocks > (1u << 20) || n > body.size() / 4 ||
      (uint64_t{nclocks} * 8 + (1 + uint64_t{nslots}) * n * 4) > body.size()) {
    return CorruptionError(path + ": chunk record sizes do not add up");
  }
  c->worker_clocks.resize(nclocks);
  for (auto& clock : c->worker_clocks) TOWERPS_RETURN_IF_ERROR(r.Get(&clock));
  if (!UpdateRule::CountsInRange(c->version, c->updates, c->worker_clocks)) {
    return CorruptionError(path +
                           ": chunk record's version, update count or worker clocks out of range");
  }
  c->values = Tensor::Empty({static_cast<int64_t>(n)});
  TOWERPS_RETURN_IF_ERROR(r.GetBytes(c->values.raw_data(), c->values.byte_size()));
  for (uint32_t s = 0; s < nslots; ++s) {
    Tensor slot = Tensor::Empty({static_cast<int64_t>(n)});
    TOWERPS_RETURN_IF_ERROR(r.GetBytes(slot.raw_data(), slot.byte_size()));
    c->slots.push_back(std::move(slot));
  }
  if (!r.done()) return CorruptionError(path + ": chunk record has trailing bytes");
  return Status::Ok();
}

int64_t Removed(const TableState& t) {
  return t.removed_ids.defined() ? t.removed_ids.num_elements() : 0;
}

std::string EncodeTable(const TableState& t) {
  Writer w;
  PutHead(w, t);
  w.Put(t.dim);
  w.Put<uint32_t>(static_cast<uint32_t>(t.slots));
  w.Put<uint32_t>(static_cast<uint32_t>(t.worker_clocks.size()));
  for (int64_t clock : t.worker_clocks) w.Put(clock);
  w.Put<uint64_t>(static_cast<uint64_t>(t.ids.num_elements()));
  w.Put<uint64_t>(static_cast<uint64_t>(t.admission_ids.num_elements()));
  w.Put<uint8_t>((t.changes_only ? 1 : 0) | (t.on_tier ? 2 : 0));  // flags
  w.Put<uint64_t>(static_cast<uint64_t>(Removed(t)));
  return std::move(w.buffer());
}

// Rows [begin, end) of `t`: their count, ids, update counts, last updates, then values and
// state.
std::string EncodeRows(const TableState& t, int64_t begin, int64_t end) {
  const int64_t stride = (1 + t.slots) * t.dim;
  const auto n = static_cast<size_t>(end - begin);
  Writer w;
  w.Put<uint32_t>(static_cast<uint32_t>(n));
  w.PutBytes(t.ids.u64() + begin, n * 8);
  w.PutBytes(t.row_updates.u32() + begin, n * 4);
  w.PutBytes(t.row_last_update.u64() + begin, n * 8);
  w.PutBytes(t.rows.f32() + begin * stride, n * static_cast<size_t>(stride) * 4);
  return std::move(w.buffer());
}

// Ids pending admission [begin, end) of `t`: their count, ids, counts and last-seen versions.
std::string EncodePending(const TableState& t, int64_t begin, int64_t end) {
  const auto n = static_cast<size_t>(end - begin);
  Writer w;
  w.Put<uint32_t>(static_cast<uint32_t>(n));
  w.PutBytes(t.admission_ids.u64() + begin, n * 8);
  w.PutBytes(t.admission_counts.u32() + begin, n * 4);
  w.PutBytes(t.admission_last_seen.u64() + begin, n * 8);
  return std::move(w.buffer());
}

// Removed ids [begin, end) of `t`: their count and ids.
std::string EncodeRemoved(const TableState& t, int64_t begin, int64_t end) {
  const auto n = static_cast<size_t>(end - begin);
  Writer w;
  w.Put<uint32_t>(static_cast<uint32_t>(n));
  w.PutBytes(t.removed_ids.u64() + begin, n * 8);
  return std::move(w.buffer());
}

// The records of `tag` that follow a table's rows, `n` entries in all: each record a count, then
// each column's entries. Memory grows with the bytes read, never with what `n` declares.
Status ReadColumns(std::istream& in, const std::string& path, const std::function<uint64_t()>& left,
                   uint32_t tag, const char* what, uint64_t n,
                   const std::vector<std::pair<Tensor*, DType>>& columns) {
  std::vector<std::string> bytes(columns.size());
  uint64_t width = 0, read = 0;
  for (const auto& column : columns) width += DTypeSize(column.second);
  std::string body;
  while (read < n) {
    uint32_t got = 0, count = 0;
    TOWERPS_RETURN_IF_ERROR(ReadRecord(in, path, left(), &got, &body));
    Reader r(body, path);
    TOWERPS_RETURN_IF_ERROR(r.Get(&count));
    if (got != tag || count == 0 || count > n - read || body.size() != 4 + count * width) {
      return CorruptionError(path + ": a table's " + what + " record is malformed");
    }
    for (size_t c = 0; c < columns.size(); ++c) {
      const size_t at = bytes[c].size(), size = count * DTypeSize(columns[c].second);
      bytes[c].resize(at + size);
      TOWERPS_RETURN_IF_ERROR(r.GetBytes(bytes[c].data() + at, size));
    }
    read += count;
  }
  for (size_t c = 0; c < columns.size(); ++c) {
    *columns[c].first = Tensor::Empty({static_cast<int64_t>(n)}, columns[c].second);
    if (n > 0) std::memcpy(columns[c].first->raw_data(), bytes[c].data(), bytes[c].size());
  }
  return Status::Ok();
}

// A table record and the rows that follow it. Sizes are checked against the bytes read: nothing
// is allocated for rows a record only declares.
Status ReadTable(std::istream& in, const std::string& body, const std::string& path,
                 const std::function<uint64_t()>& left, const CheckpointMeta& meta, int format,
                 TableState* t) {
  Reader r(body, path);
  uint32_t slots = 0, nclocks = 0;
  uint64_t n = 0, pending = 0, removed = 0;
  uint8_t flags = 0;  // 1: changes only; 2: the rest on the tier (format 7)
  TOWERPS_RETURN_IF_ERROR(GetHead(r, t));
  TOWERPS_RETURN_IF_ERROR(r.Get(&t->dim));
  TOWERPS_RETURN_IF_ERROR(r.Get(&slots));
  TOWERPS_RETURN_IF_ERROR(r.Get(&nclocks));
  if (slots > 4 || nclocks > (1u << 20) || t->dim < 1 || t->dim > kMaxTableDim ||
      uint64_t{nclocks} * 8 > body.size()) {
    return CorruptionError(path + ": table record sizes do not add up");
  }
  t->slots = static_cast<int>(slots);
  t->worker_clocks.resize(nclocks);
  for (auto& clock : t->worker_clocks) TOWERPS_RETURN_IF_ERROR(r.Get(&clock));
  if (!UpdateRule::CountsInRange(t->version, t->updates, t->worker_clocks)) {
    return CorruptionError(path +
                           ": table record's version, update count or worker clocks out of range");
  }
  TOWERPS_RETURN_IF_ERROR(r.Get(&n));
  TOWERPS_RETURN_IF_ERROR(r.Get(&pending));
  if (format >= 6) {
    TOWERPS_RETURN_IF_ERROR(r.Get(&flags));
    TOWERPS_RETURN_IF_ERROR(r.Get(&removed));
  }
  if (!r.done()) return CorruptionError(path + ": table record has trailing bytes");
  // Only a delta holds changes, and only they name removed ids; only a full one uses a tier.
  t->changes_only = (flags & 1) != 0;
  t->on_tier = (flags & 2) != 0;
  if (flags > (format >= 7 ? 3 : 1) || (t->changes_only && meta.delta == 0) ||
      (removed > 0 && !t->changes_only) || (t->on_tier && (t->changes_only || meta.delta != 0))) {
    return CorruptionError(path + ": a table record's changes do not fit the file");
  }
  const uint64_t stride = (1 + uint64_t{slots}) * static_cast<uint64_t>(t->dim);
  std::vector<uint64_t> ids;
  std::vector<uint32_t> updates;
  std::vector<uint64_t> last_update;
  std::vector<float> rows;
  std::string rows_body;
  while (ids.size() < n) {
    uint32_t tag = 0;
    TOWERPS_RETURN_IF_ERROR(ReadRecord(in, path, left(), &tag, &rows_body));
    Reader rr(rows_body, path);
    uint32_t count = 0;
    TOWERPS_RETURN_IF_ERROR(rr.Get(&count));
    if (tag != kRowsTag || count == 0 || count > n - ids.size() ||
        rows_body.size() != 4 + uint64_t{count} * (20 + stride * 4)) {
      return CorruptionError(path + ": a table's rows record is malformed");
    }
    const size_t at = ids.size();
    ids.resize(at + count);
    updates.resize(at + count);
    last_update.resize(at + count);
    rows.resize((at + count) * stride);
    TOWERPS_RETURN_IF_ERROR(rr.GetBytes(ids.data() + at, uint64_t{count} * 8));
    TOWERPS_RETURN_IF_ERROR(rr.GetBytes(updates.data() + at, uint64_t{count} * 4));
    TOWERPS_RETURN_IF_ERROR(rr.GetBytes(last_update.data() + at, uint64_t{count} * 8));
    TOWERPS_RETURN_IF_ERROR(rr.GetBytes(rows.data() + at * stride, count * stride * 4));
  }
  const auto rows_n = static_cast<int64_t>(n);
  t->ids = Tensor::Empty({rows_n}, DType::kUInt64);
  t->row_updates = Tensor::Empty({rows_n}, DType::kUInt32);
  t->row_last_update = Tensor::Empty({rows_n}, DType::kUInt64);
  t->rows = Tensor::Empty({rows_n, static_cast<int64_t>(stride)});
  if (n > 0) {  // an empty partition's vectors hold no buffer to copy from
    std::memcpy(t->ids.raw_data(), ids.data(), ids.size() * 8);
    std::memcpy(t->row_updates.raw_data(), updates.data(), updates.size() * 4);
    std::memcpy(t->row_last_update.raw_data(), last_update.data(), last_update.size() * 8);
    std::memcpy(t->rows.raw_data(), rows.data(), rows.size() * 4);
  }
  TOWERPS_RETURN_IF_ERROR(ReadColumns(in, path, left, kPendingTag, "pending-admission", pending,
                                      {{&t->admission_ids, DType::kUInt64},
                                       {&t->admission_counts, DType::kUInt32},
                                       {&t->admission_last_seen, DType::kUInt64}}));
  return ReadColumns(in, path, left, kRemovedTag, "removed-ids", removed,
                     {{&t->removed_ids, DType::kUInt64}});
}

// The error for a failed `step` ("write", "fsync", ...) on the temporary file `tmp` while
// saving `path`: names both files and, when the disk is full, says so and what to do.
Status SaveError(const std::string& tmp, const std::string& path, const char* step, int err) {
  std::string m = tmp + ": " + step + " failed: " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) {
    const std::string dir = std::filesystem::path(path).parent_path().string();
    m += std::string(err == ENOSPC ? " (ENOSPC)" : " (EDQUOT)") + ": the file system holding " +
         (dir.empty() ? std::string(".") : dir) +
         " is full; free space there or checkpoint to another directory";
  }
  return IoError(m + "; the previous checkpoint " + path + ", if any, is unchanged");
}

Status WriteAll(int fd, const std::string& data, const std::string& tmp, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SaveError(tmp, path, "write", errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

std::string CheckpointPath(const std::string& dir, int server_rank) {
  return (std::filesystem::path(dir) / ("ps-" + std::to_string(server_rank) + ".ckpt")).string();
}

std::string DeltaPath(const std::string& dir, int server_rank, uint32_t delta) {
  return CheckpointPath(dir, server_rank) + ".delta-" + std::to_string(delta);
}

Status SaveCheckpoint(const std::string& path, const Checkpoint& checkpoint) {
  std::string data(kMagic, sizeof(kMagic));
  AppendRecord(&data, kHeaderTag, EncodeMeta(checkpoint.meta));
  for (const ChunkState& c : checkpoint.chunks) AppendRecord(&data, kChunkTag, EncodeChunk(c));
  for (const TableState& t : checkpoint.tables) {
    AppendRecord(&data, kTableTag, EncodeTable(t));
    for (int64_t begin = 0; begin < t.ids.num_elements(); begin += kRowsPerRecord) {
      const int64_t end = std::min(t.ids.num_elements(), begin + kRowsPerRecord);
      AppendRecord(&data, kRowsTag, EncodeRows(t, begin, end));
    }
    for (int64_t begin = 0; begin < t.admission_ids.num_elements(); begin += kRowsPerRecord) {
      const int64_t end = std::min(t.admission_ids.num_elements(), begin + kRowsPerRecord);
      AppendRecord(&data, kPendingTag, EncodePending(t, begin, end));
    }
    for (int64_t begin = 0; begin < Removed(t); begin += kRowsPerRecord) {
      const int64_t end = std::min(Removed(t), begin + kRowsPerRecord);
      AppendRecord(&data, kRemovedTag, EncodeRemoved(t, begin, end));
    }
  }
  Writer count;
  count.Put<uint64_t>(checkpoint.chunks.size() + checkpoint.tables.size());
  AppendRecord(&data, kEndTag, count.buffer());

  // The temporary file sits in the same directory, so the rename below is atomic.
  const std::string tmp = path + ".tmp";
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return SaveError(tmp, path, "create", errno);
  Status s = WriteAll(fd, data, tmp, path);
  if (s.ok() && fsync(fd) != 0) s = SaveError(tmp, path, "fsync", errno);
  // close() reports delayed write errors on some file systems (NFS): it counts as a failure.
  if (close(fd) != 0 && s.ok()) s = SaveError(tmp, path, "close", errno);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = SaveError(tmp, path, ("rename to " + path).c_str(), errno);
  }
  if (!s.ok()) {
    unlink(tmp.c_str());  // never leave a partial file behind to fill the disk further
    return s;
  }
  // The rename is durable only once the directory is synced.
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int dfd = open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    return IoError(path + " was written, but its directory cannot be opened to sync it: " +
                   std::strerror(errno) + "; a power failure may lose it");
  }
  // EINVAL: this file system cannot sync directories; nothing more can be done there.
  if (fsync(dfd) != 0 && errno != EINVAL) {
    const int err = errno;
    close(dfd);
    return IoError(path + " was written, but syncing its directory failed: " + std::strerror(err) +
                   "; a power failure may lose it");
  }
  close(dfd);
  return Status::Ok();
}

Result<Checkpoint> LoadCheckpoint(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return NotFoundError(path + ": " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open");
  return ReadCheckpoint(in, size, path);
}

Result<Checkpoint> ReadCheckpoint(std::istream& in, uint64_t size, const std::string& path) {
  char magic[sizeof(kMagic)];
  if (!in.read(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic) - 1) != 0) {
    return CorruptionError(path + ": not a TowerPS checkpoint (bad magic)");
  }
  const int format = magic[sizeof(kMagic) - 1];
  if (format < kOldestFormat || format > kMagic[sizeof(kMagic) - 1]) {
    return CorruptionError(path + ": checkpoint format " + std::to_string(format) +
                           " is not one this TowerPS reads (" + std::to_string(kOldestFormat) +
                           " to " + std::to_string(kMagic[sizeof(kMagic) - 1]) +
                           "): it was written by another version");
  }
  Checkpoint ck;
  uint32_t tag;
  std::string body;
  auto left = [&]() { return size - static_cast<uint64_t>(in.tellg()); };
  TOWERPS_RETURN_IF_ERROR(ReadRecord(in, path, left(), &tag, &body));
  if (tag != kHeaderTag) return CorruptionError(path + ": header record missing");
  TOWERPS_RETURN_IF_ERROR(DecodeMeta(body, path, format, &ck.meta));
  for (;;) {
    TOWERPS_RETURN_IF_ERROR(ReadRecord(in, path, left(), &tag, &body));
    if (tag == kEndTag) break;
    if (tag == kTableTag) {
      TableState t;
      TOWERPS_RETURN_IF_ERROR(ReadTable(in, body, path, left, ck.meta, format, &t));
      ck.tables.push_back(std::move(t));
      continue;
    }
    if (tag != kChunkTag) return CorruptionError(path + ": unknown record type");
    ChunkState c;
    TOWERPS_RETURN_IF_ERROR(DecodeChunk(body, path, &c));
    ck.chunks.push_back(std::move(c));
  }
  Reader end(body, path);
  uint64_t count;
  TOWERPS_RETURN_IF_ERROR(end.Get(&count));
  if (count != ck.chunks.size() + ck.tables.size()) {
    return CorruptionError(path + ": end marker counts " + std::to_string(count) +
                           " chunks and tables but the file holds " +
                           std::to_string(ck.chunks.size() + ck.tables.size()));
  }
  if (left() != 0) return CorruptionError(path + ": bytes follow the end marker");
  return ck;
}

}  // namespace towerps::ps
