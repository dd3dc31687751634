#include "worker/data/idx_reader.h"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

namespace towerps::worker {
namespace {

constexpr uint8_t kUnsignedByte = 0x08;
constexpr int kMaxRank = 4;
constexpr size_t kReadBlock = 1 << 16;

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads up to `n` bytes; returns how many were read, or an error for a corrupt gzip stream.
Result<size_t> ReadSome(gzFile f, const std::string& path, void* out, size_t n) {
  const int got = gzread(f, out, static_cast<unsigned>(n));
  if (got < 0) {
    int code = 0;
    const char* msg = gzerror(f, &code);
    return CorruptionError(path + ": cannot decompress: " + (msg ? msg : "unknown zlib error"));
  }
  return static_cast<size_t>(got);
}

}  // namespace

Result<IdxArray> ReadIdxFile(const std::string& path, bool header_only) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    return NotFoundError(path + ": " + std::strerror(errno) +
                         " (for Fashion-MNIST install the dataset-fashion-mnist package or pass "
                         "--data-dir)");
  }
  // gzopen reads plain files transparently, so one path handles both.
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) return IoError(path + ": cannot open: " + std::strerror(errno));

  uint8_t magic[4];
  TOWERPS_ASSIGN_OR_RETURN(size_t got, ReadSome(f.get(), path, magic, 4));
  if (got != 4 || magic[0] != 0 || magic[1] != 0) {
    return CorruptionError(path + ": not an IDX file (bad magic number)");
  }
  if (magic[2] != kUnsignedByte) {
    return CorruptionError(path + ": IDX element type 0x" + std::to_string(magic[2]) +
                           " is not supported (only unsigned byte, 0x08)");
  }
  const int rank = magic[3];
  if (rank < 1 || rank > kMaxRank) {
    return CorruptionError(path + ": IDX rank " + std::to_string(rank) + " is out of range 1.." +
                           std::to_string(kMaxRank));
  }
  IdxArray out;
  uint64_t expected = 1;
  for (int i = 0; i < rank; ++i) {
    uint8_t b[4];
    TOWERPS_ASSIGN_OR_RETURN(got, ReadSome(f.get(), path, b, 4));
    if (got != 4) return CorruptionError(path + ": truncated in the IDX dimension list");
    const uint32_t d =
        (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
    out.dims.push_back(d);
    expected *= d;  // at most (2^32)^4: checked against the bytes really present below
    if (expected > (uint64_t{1} << 40)) {
      return CorruptionError(path + ": IDX dimensions declare over 1 TiB of data");
    }
  }
  if (header_only) return out;
  // One allocation of the declared size, so that no doubling leaves freed copies resident (a
  // worker's memory is mostly its data). Deflate expands at most 1032:1, so a header declaring
  // more than that of the file is read block by block and found truncated.
  out.data.reserve(static_cast<size_t>(
      std::min<uint64_t>(expected, uint64_t{1032} * static_cast<uint64_t>(st.st_size))));
  while (out.data.size() < expected) {
    const size_t want =
        static_cast<size_t>(std::min<uint64_t>(kReadBlock, expected - out.data.size()));
    const size_t old = out.data.size();
    out.data.resize(old + want);
    TOWERPS_ASSIGN_OR_RETURN(got, ReadSome(f.get(), path, out.data.data() + old, want));
    out.data.resize(old + got);
    if (got == 0) {
      return CorruptionError(path + ": truncated: the header declares " + std::to_string(expected) +
                             " data bytes but the file holds " + std::to_string(out.data.size()));
    }
  }
  uint8_t extra;
  TOWERPS_ASSIGN_OR_RETURN(got, ReadSome(f.get(), path, &extra, 1));
  if (got != 0) {
    return CorruptionError(path + ": size mismatch: bytes follow the " + std::to_string(expected) +
                           " the header declares");
  }
  return out;
}

}  // namespace towerps::worker
