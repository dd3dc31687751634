#include "worker/data/npy_reader.h"

#include <sys/stat.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>

namespace towerps::worker {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr size_t kMaxHeader = 1 << 20;  // np.save writes a few hundred bytes

// A cursor over the header's dict literal; every Expect/Parse returns false on a mismatch.
class DictParser {
 public:
  explicit DictParser(const std::string& text) : s_(text) {}

  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool Peek(char c) {
    SkipSpace();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool Expect(char c) {
    if (!Peek(c)) return false;
    ++pos_;
    return true;
  }
  bool ParseString(std::string* out) {
    SkipSpace();
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return false;
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string::npos) return false;
    *out = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return true;
  }
  bool ParseWord(std::string* out) {
    SkipSpace();
    const size_t start = pos_;
    while (pos_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[pos_]))) ++pos_;
    *out = s_.substr(start, pos_ - start);
    return !out->empty();
  }
  bool ParseDim(int64_t* out) {
    SkipSpace();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      const int digit = s_[pos_++] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) return false;
      v = v * 10 + digit;
    }
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2's long suffix
    *out = v;
    return pos_ > start;
  }
  // "(a, b, c)", "(a,)" or "()".
  bool ParseShape(Shape* out) {
    if (!Expect('(')) return false;
    out->clear();
    while (!Peek(')')) {
      int64_t d = 0;
      if (!ParseDim(&d)) return false;
      out->push_back(d);
      if (!Expect(',')) break;
    }
    return Expect(')');
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == s_.size();
  }

 private:
  const std::string& s_;
  size_t pos_ = 0;
};

// The magic and version bytes, then the header length: 2 bytes in version 1, 4 in later ones.
size_t LengthBytes(const std::string& bytes) { return static_cast<uint8_t>(bytes[6]) == 1 ? 2 : 4; }

// The header length of `bytes` (at least 8 + LengthBytes(bytes) of them), little-endian.
uint64_t HeaderLength(const std::string& bytes) {
  uint64_t length = 0;
  for (size_t i = 0; i < LengthBytes(bytes); ++i) {
    length |= uint64_t{static_cast<uint8_t>(bytes[8 + i])} << (8 * i);
  }
  return length;
}

Status Corrupt(const std::string& path, const std::string& what) {
  return CorruptionError(path + ": " + what);
}

}  // namespace

Result<NpyHeader> ParseNpyHeader(const std::string& path, const std::string& bytes) {
  if (bytes.size() < kMagicSize + 4 || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    return Corrupt(path, "not a .npy file (bad magic; write it with numpy.save)");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    return Corrupt(path, ".npy format version " + std::to_string(major) + "." +
                             std::to_string(minor) + " is not supported (1.0, 2.0 or 3.0)");
  }
  const size_t len_bytes = LengthBytes(bytes);
  if (bytes.size() < 8 + len_bytes) return Corrupt(path, "truncated in the .npy header length");
  const uint64_t header_len = HeaderLength(bytes);
  if (header_len > kMaxHeader) {
    return Corrupt(path, ".npy header length " + std::to_string(header_len) + " is implausible");
  }
  NpyHeader h;
  h.data_offset = 8 + len_bytes + header_len;
  if (bytes.size() < h.data_offset) return Corrupt(path, "truncated in the .npy header");
  const std::string dict = bytes.substr(8 + len_bytes, header_len);
  DictParser p(dict);
  bool have_descr = false, have_order = false, have_shape = false, fortran = false;
  const std::string bad_dict =
      "the .npy header is not a dict with 'descr', 'fortran_order' and "
      "'shape': " +
      dict.substr(0, 120);
  if (!p.Expect('{')) return Corrupt(path, bad_dict);
  while (!p.Peek('}')) {
    std::string key;
    if (!p.ParseString(&key) || !p.Expect(':')) return Corrupt(path, bad_dict);
    if (key == "descr" && p.ParseString(&h.descr)) {
      have_descr = true;
    } else if (key == "fortran_order") {
      std::string word;
      if (!p.ParseWord(&word) || (word != "True" && word != "False"))
        return Corrupt(path, bad_dict);
      fortran = word == "True";
      have_order = true;
    } else if (key == "shape" && p.ParseShape(&h.shape)) {
      have_shape = true;
    } else {
      return Corrupt(path, bad_dict);
    }
    if (!p.Expect(',')) break;
  }
  if (!p.Expect('}') || !p.AtEnd() || !have_descr || !have_order || !have_shape) {
    return Corrupt(path, bad_dict);
  }
  if (fortran) {
    return Corrupt(path,
                   "fortran_order is True; save a C-order array "
                   "(numpy.save(path, numpy.ascontiguousarray(x)))");
  }
  const std::string& d = h.descr;
  const bool little = d.size() == 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=');
  h.kind = little ? d[1] : '?';
  h.item_size = little && std::isdigit(static_cast<unsigned char>(d[2])) ? d[2] - '0' : 0;
  const bool supported =
      little && ((h.kind == 'f' && (h.item_size == 4 || h.item_size == 8)) ||
                 ((h.kind == 'i' || h.kind == 'u') &&
                  (h.item_size == 1 || h.item_size == 2 || h.item_size == 4 || h.item_size == 8)));
  if (!supported) {
    return Corrupt(
        path, "dtype '" + d + "' is not supported (little-endian float32, float64 or integers)");
  }
  return h;
}

Result<NpyHeader> ReadNpyHeader(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open: " + std::strerror(errno));
  std::string bytes(12, '\0');
  in.read(bytes.data(), 12);
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (bytes.size() >= 12 && bytes.compare(0, kMagicSize, kMagic, kMagicSize) == 0) {
    const uint64_t header_len = HeaderLength(bytes);
    if (header_len <= kMaxHeader) {
      bytes.resize(8 + LengthBytes(bytes) + header_len);
      in.read(bytes.data() + 12, static_cast<std::streamsize>(bytes.size() - 12));
      bytes.resize(12 + static_cast<size_t>(in.gcount()));
    }
  }
  TOWERPS_ASSIGN_OR_RETURN(NpyHeader h, ParseNpyHeader(path, bytes));
  Result<int64_t> n = CheckedNumElements(h.shape);
  if (!n.ok())
    return Corrupt(path, "shape " + ShapeToString(h.shape) + ": " + n.status().message());
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return IoError(path + ": " + std::strerror(errno));
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint64_t need = static_cast<uint64_t>(*n);
  if (need > (uint64_t{1} << 40) / static_cast<uint64_t>(h.item_size) ||
      size - h.data_offset != need * static_cast<uint64_t>(h.item_size)) {
    return Corrupt(path, "shape " + ShapeToString(h.shape) + " of '" + h.descr + "' needs " +
                             std::to_string(need * static_cast<uint64_t>(h.item_size)) +
                             " data bytes, but the file holds " +
                             std::to_string(size - h.data_offset));
  }
  return h;
}

Result<NpyArray> ReadNpyFile(const std::string& path) {
  NpyArray out;
  TOWERPS_ASSIGN_OR_RETURN(out.header, ReadNpyHeader(path));
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError(path + ": cannot open: " + std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(out.header.data_offset));
  out.data.resize(static_cast<size_t>(NumElements(out.header.shape)) *
                  static_cast<size_t>(out.header.item_size));
  in.read(reinterpret_cast<char*>(out.data.data()), static_cast<std::streamsize>(out.data.size()));
  if (static_cast<size_t>(in.gcount()) != out.data.size()) {
    return IoError(path + ": read " + std::to_string(in.gcount()) + " of " +
                   std::to_string(out.data.size()) + " data bytes");
  }
  return out;
}

int64_t NpyIntegerAt(const NpyArray& a, int64_t i) {
  const uint8_t* p = a.data.data() + i * a.header.item_size;
  uint64_t raw = 0;
  for (int b = 0; b < a.header.item_size; ++b) raw |= uint64_t{p[b]} << (8 * b);
  if (a.header.kind == 'i' && a.header.item_size < 8) {
    const int shift = 64 - 8 * a.header.item_size;
    return static_cast<int64_t>(raw << shift) >> shift;  // sign-extend
  }
  return static_cast<int64_t>(raw);
}

}  // namespace towerps::worker
