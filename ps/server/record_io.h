// Record I/O: the framing of checkpoint files (ps/server/checkpoint.h). A record is a tag
// (u32), the body's length (u64), the body and its CRC-32 (zlib, u32), little-endian; Writer
// builds a body from plain values, Reader takes them back, never reading past its end.
//
// Contract: Writer and Reader are single-use values, thread-compatible; the free functions are
// thread-safe. Every error is kCorruption naming the file.
#ifndef TOWERPS_PS_SERVER_RECORD_IO_H_
#define TOWERPS_PS_SERVER_RECORD_IO_H_

#include <cstdint>
#include <cstring>
#include <istream>
#include <string>
#include <utility>

#include "towerps/result.h"

namespace towerps::ps {

// The largest record ReadRecord accepts.
inline constexpr uint64_t kMaxRecordBytes = uint64_t{1} << 36;

// Appends plain values to a record buffer.
class Writer {
 public:
  template <typename T>
  void Put(const T& v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    buf_.append(p, sizeof(T));
  }
  void PutBytes(const void* p, size_t n) { buf_.append(static_cast<const char*>(p), n); }
  void PutString(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    buf_.append(s);
  }
  std::string& buffer() { return buf_; }

 private:
  std::string buf_;
};

// Reads values from a validated record, failing (never reading past the end) on short data.
class Reader {
 public:
  Reader(const std::string& buf, std::string where) : buf_(buf), where_(std::move(where)) {}
  template <typename T>
  Status Get(T* v) {
    return GetBytes(v, sizeof(T));
  }
  Status GetBytes(void* out, size_t n) {
    if (n > buf_.size() - pos_) return CorruptionError(where_ + ": record ends early");
    std::memcpy(out, buf_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  Status GetString(std::string* s) {
    uint32_t n = 0;
    TOWERPS_RETURN_IF_ERROR(Get(&n));
    if (n > buf_.size() - pos_) return CorruptionError(where_ + ": string runs past its record");
    s->assign(buf_.data() + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  bool done() const { return pos_ == buf_.size(); }

 private:
  const std::string& buf_;
  std::string where_;
  size_t pos_ = 0;
};

// The CRC-32 of a record body.
uint32_t Crc(const std::string& s);
// Appends the record (tag, body) to `out`.
void AppendRecord(std::string* out, uint32_t tag, const std::string& body);
// Reads the next record of `in` (of `path`, with `file_left` bytes left) into tag and body,
// checking its length against what is left and its CRC.
Status ReadRecord(std::istream& in, const std::string& path, uint64_t file_left, uint32_t* tag,
                  std::string* body);

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_RECORD_IO_H_
