#include "common/event_writer.h"

#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

namespace towerps {
namespace {

// Protobuf's wire format, for the few fields written.
enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutKey(std::string* out, uint32_t field, WireType type) { PutVarint(out, field << 3 | type); }
template <typename T>
void PutLittleEndian(std::string* out, T v) {  // x86-64 and arm64 are little-endian
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out->append(bytes, sizeof(T));
}
void PutDouble(std::string* out, uint32_t field, double v) {
  PutKey(out, field, kFixed64);
  PutLittleEndian(out, v);
}
void PutBytes(std::string* out, uint32_t field, std::string_view bytes) {
  PutKey(out, field, kBytes);
  PutVarint(out, bytes.size());
  out->append(bytes);
}
void PutPackedDoubles(std::string* out, uint32_t field, const std::vector<double>& values) {
  std::string packed;
  for (double v : values) PutLittleEndian(&packed, v);
  PutBytes(out, field, packed);
}

double WallTime() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Event.summary (field 5): a Summary of these encoded Summary.Values (its field 1, repeated).
std::string SummaryField(const std::vector<std::string>& values) {
  std::string summary;
  for (const std::string& value : values) PutBytes(&summary, 1, value);
  std::string field;
  PutBytes(&field, 5, summary);
  return field;
}

}  // namespace

uint32_t MaskedCrc32c(std::string_view data) {
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data.data(), data.size());
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string TfRecord(std::string_view data) {
  std::string record;
  std::string length;
  PutLittleEndian<uint64_t>(&length, data.size());
  record += length;
  PutLittleEndian(&record, MaskedCrc32c(length));
  record.append(data);
  PutLittleEndian(&record, MaskedCrc32c(data));
  return record;
}

Result<std::unique_ptr<EventWriter>> EventWriter::Create(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("--logdir " + dir + ": cannot create: " + ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  const auto seconds = static_cast<long long>(WallTime());
  const std::string path =
      (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(seconds) + "." + host +
                                     "." + std::to_string(getpid())))
          .string();
  std::FILE* file = std::fopen(path.c_str(), "wbx");  // never another process's file
  if (file == nullptr) return IoError(path + ": cannot create: " + std::strerror(errno));
  std::unique_ptr<EventWriter> writer(new EventWriter(file, path));
  std::string version;
  PutBytes(&version, 3, "brain.Event:2");
  TOWERPS_RETURN_IF_ERROR(writer->WriteEvent(0, version));
  return writer;
}

EventWriter::~EventWriter() { std::fclose(file_); }

Status EventWriter::WriteEvent(int64_t step, std::string_view payload_fields) {
  std::string event;
  PutDouble(&event, 1, WallTime());
  PutKey(&event, 2, kVarint);
  PutVarint(&event, static_cast<uint64_t>(step));
  event.append(payload_fields);
  const std::string record = TfRecord(event);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fflush(file_) != 0) {
    return IoError(path_ + ": write failed: " + std::strerror(errno));
  }
  return Status::Ok();
}

Status EventWriter::Scalars(int64_t step,
                            const std::vector<std::pair<std::string, double>>& values) {
  std::vector<std::string> encoded;
  for (const auto& [tag, v] : values) {
    std::string& value = encoded.emplace_back();
    PutBytes(&value, 1, tag);
    PutKey(&value, 2, kFixed32);
    PutLittleEndian(&value, static_cast<float>(v));
  }
  return WriteEvent(step, SummaryField(encoded));
}

Status EventWriter::Histogram(int64_t step, const std::string& tag,
                              const std::vector<uint64_t>& counts) {
  double num = 0, sum = 0, sum_squares = 0, min = 0, max = 0;
  bool any = false;
  std::vector<double> limits, buckets;
  for (size_t i = 0; i < counts.size(); ++i) {
    const auto x = static_cast<double>(i), n = static_cast<double>(counts[i]);
    if (counts[i] > 0) {
      min = any ? min : x;
      max = x;
      any = true;
    }
    num += n;
    sum += n * x;
    sum_squares += n * x * x;
    limits.push_back(x + 0.5);  // bucket i holds (i - 0.5, i + 0.5]: the integer i
    buckets.push_back(n);
  }
  std::string histo;
  PutDouble(&histo, 1, min);
  PutDouble(&histo, 2, max);
  PutDouble(&histo, 3, num);
  PutDouble(&histo, 4, sum);
  PutDouble(&histo, 5, sum_squares);
  PutPackedDoubles(&histo, 6, limits);
  PutPackedDoubles(&histo, 7, buckets);
  std::string value;
  PutBytes(&value, 1, tag);
  PutBytes(&value, 5, histo);
  return WriteEvent(step, SummaryField({value}));
}

}  // namespace towerps
