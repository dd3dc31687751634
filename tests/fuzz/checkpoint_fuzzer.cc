// The checkpoint reader (ps/server/checkpoint.h: ReadCheckpoint, the body of LoadCheckpoint), which
// a restarting server runs on whatever file it finds in --checkpoint-dir.
//
// Input: a flags byte, then the file. With flag bit 0 set the harness first rewrites each
// record's CRC-32 to match its body (walking the records as the reader does), so that mutations
// reach the record decoders instead of stopping at the checksum. A checkpoint that loads must be
// self-consistent: valid variable shapes, every chunk's slots as long as its values, and no more
// data than the file holds.
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>

#include "ps/server/checkpoint.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

// Record layout (ps/server/checkpoint.cc): tag u32, length u64, body, crc32(body) u32; after 8
// magic bytes.
void FixCrcs(std::string& file) {
  size_t pos = 8;
  while (pos + 12 <= file.size()) {
    uint64_t len;
    std::memcpy(&len, file.data() + pos + 4, 8);
    const size_t body = pos + 12;
    if (len > file.size() - body || file.size() - body - len < 4) return;
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(file.data() + body), static_cast<uInt>(len)));
    std::memcpy(file.data() + body + len, &crc, 4);
    pos = body + len + 4;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string file(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) FixCrcs(file);
  std::istringstream in(file);
  towerps::Result<towerps::ps::Checkpoint> ck =
      towerps::ps::ReadCheckpoint(in, file.size(), "fuzz.ckpt");
  if (!ck.ok()) {
    const towerps::StatusCode code = ck.status().code();
    FUZZ_CHECK(code == towerps::StatusCode::kCorruption ||
                   code == towerps::StatusCode::kFailedPrecondition,
               "unexpected error kind: " + ck.status().ToString());
    return 0;
  }
  for (const towerps::ps::VariableSpec& v : ck->meta.variables) {
    FUZZ_CHECK(towerps::CheckedNumElements(v.shape).ok(), "variable " + v.name + " shape");
  }
  uint64_t bytes = 0;
  for (const towerps::ps::ChunkState& c : ck->chunks) {
    bytes += c.values.byte_size() + 8 * c.worker_clocks.size();
    for (const towerps::Tensor& s : c.slots) {
      FUZZ_CHECK(s.num_elements() == c.values.num_elements(), "a slot differs from its values");
      bytes += s.byte_size();
    }
  }
  FUZZ_CHECK(bytes <= file.size(), "the chunks hold more bytes than the file");
  return 0;
}
