#include "ps/server/record_io.h"

#include <zlib.h>

namespace towerps::ps {

uint32_t Crc(const std::string& s) {
  return static_cast<uint32_t>(
      crc32(0, reinterpret_cast<const Bytef*>(s.data()), static_cast<uInt>(s.size())));
}

void AppendRecord(std::string* out, uint32_t tag, const std::string& body) {
  Writer w;
  w.Put(tag);
  w.Put<uint64_t>(body.size());
  w.PutBytes(body.data(), body.size());
  w.Put(Crc(body));
  out->append(w.buffer());
}

Status ReadRecord(std::istream& in, const std::string& path, uint64_t file_left, uint32_t* tag,
                  std::string* body) {
  uint64_t len;
  if (!in.read(reinterpret_cast<char*>(tag), 4) || !in.read(reinterpret_cast<char*>(&len), 8)) {
    return CorruptionError(path + ": truncated (a record header is cut off)");
  }
  if (len > kMaxRecordBytes || len + 4 > file_left) {
    return CorruptionError(path + ": truncated or corrupt (a record claims " + std::to_string(len) +
                           " bytes)");
  }
  body->resize(len);
  uint32_t crc;
  if (!in.read(body->data(), static_cast<std::streamsize>(len)) ||
      !in.read(reinterpret_cast<char*>(&crc), 4)) {
    return CorruptionError(path + ": truncated inside a record");
  }
  if (crc != Crc(*body)) return CorruptionError(path + ": CRC mismatch; the file is corrupt");
  return Status::Ok();
}

}  // namespace towerps::ps
