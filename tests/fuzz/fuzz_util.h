// Shared by the libFuzzer harnesses of tests/fuzz and their seed generator (fuzz_seeds.cc):
// invariant checks, an in-memory file for the readers that take a path, and the layout that
// turns one fuzzer input into the frames of a message.
//
// Contract: header-only; one harness runs one input at a time, so MemFile is a per-process
// singleton and not thread-safe.
#ifndef TOWERPS_TESTS_FUZZ_FUZZ_UTIL_H_
#define TOWERPS_TESTS_FUZZ_FUZZ_UTIL_H_

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

// A broken promise of the code under test: prints `what` and aborts, which libFuzzer reports as a
// finding (with the input that caused it).
#define FUZZ_CHECK(cond, what)                                                              \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed: %s\n", __FILE__, __LINE__, #cond, \
                   std::string(what).c_str());                                              \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

namespace towerps::fuzz {

// The current input as a file that lives in memory (memfd): path() opens it from its start, as
// often as a reader likes. No disk I/O, and nothing to clean up when a finding kills the process.
class MemFile {
 public:
  static MemFile& Get() {
    static MemFile file;
    return file;
  }
  // Replaces the file's contents with `data`; returns its path.
  const std::string& Write(const void* data, size_t size) {
    FUZZ_CHECK(ftruncate(fd_, 0) == 0, "ftruncate of the memfd");
    FUZZ_CHECK(size == 0 || pwrite(fd_, data, size, 0) == static_cast<ssize_t>(size),
               "pwrite to the memfd");
    return path_;
  }

 private:
  MemFile() : fd_(memfd_create("towerps-fuzz", 0)) {
    FUZZ_CHECK(fd_ >= 0, "memfd_create");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  int fd_;
  std::string path_;
};

// Message frames from one input: byte 0 picks the frame count (byte % (kMaxFrames + 1)); then each
// frame is a little-endian uint16 length and that many bytes (fewer where the input ends). Bytes
// after the last frame are ignored.
inline constexpr int kMaxFrames = 6;

inline std::vector<std::string> SplitFrames(const uint8_t* data, size_t size) {
  std::vector<std::string> frames;
  if (size == 0) return frames;
  const int count = data[0] % (kMaxFrames + 1);
  size_t pos = 1;
  for (int i = 0; i < count; ++i) {
    size_t len = 0;
    if (pos + 2 <= size) len = data[pos] | (size_t{data[pos + 1]} << 8);
    pos = std::min(pos + 2, size);
    len = std::min(len, size - pos);
    frames.emplace_back(reinterpret_cast<const char*>(data + pos), len);
    pos += len;
  }
  return frames;
}

// The inverse of SplitFrames (frames of at most 65535 bytes, at most kMaxFrames of them).
inline std::string JoinFrames(const std::vector<std::string>& frames) {
  std::string out(1, static_cast<char>(frames.size()));
  for (const std::string& f : frames) {
    out += static_cast<char>(f.size() & 0xff);
    out += static_cast<char>(f.size() >> 8);
    out += f;
  }
  return out;
}

}  // namespace towerps::fuzz

#endif  // TOWERPS_TESTS_FUZZ_FUZZ_UTIL_H_
