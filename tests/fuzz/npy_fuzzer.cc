// The .npy reader (worker/data/npy_reader.h), which --dataset npy runs on the user's files. The
// input is the file (through an in-memory file: the reader takes a path). An array that loads has
// a supported dtype, exactly NumElements(shape) * item_size data bytes, taken from the end of the
// file, and the same header as ParseNpyHeader of the bytes gives; its integers read in bounds.
#include <cstdint>
#include <cstring>

#include "tests/fuzz/fuzz_util.h"
#include "worker/data/npy_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace towerps;
  const std::string& path = fuzz::MemFile::Get().Write(data, size);
  Result<worker::NpyArray> a = worker::ReadNpyFile(path);
  if (!a.ok()) {
    FUZZ_CHECK(a.status().code() == StatusCode::kCorruption,
               "unexpected error kind: " + a.status().ToString());
    return 0;
  }
  const worker::NpyHeader& h = a->header;
  FUZZ_CHECK(h.kind == 'f' || h.kind == 'i' || h.kind == 'u', "kind " + std::string(1, h.kind));
  FUZZ_CHECK(h.item_size == 1 || h.item_size == 2 || h.item_size == 4 || h.item_size == 8,
             "item size " + std::to_string(h.item_size));
  const Result<int64_t> n = CheckedNumElements(h.shape);
  FUZZ_CHECK(n.ok(), "shape " + ShapeToString(h.shape));
  FUZZ_CHECK(a->data.size() == static_cast<size_t>(*n) * h.item_size, "data size");
  FUZZ_CHECK(h.data_offset + a->data.size() == size, "data does not end the file");
  FUZZ_CHECK(
      a->data.empty() || std::memcmp(a->data.data(), data + h.data_offset, a->data.size()) == 0,
      "data differs from the file");
  const Result<worker::NpyHeader> parsed =
      worker::ParseNpyHeader(path, std::string(reinterpret_cast<const char*>(data), size));
  FUZZ_CHECK(parsed.ok() && parsed->shape == h.shape && parsed->descr == h.descr &&
                 parsed->data_offset == h.data_offset,
             "ParseNpyHeader disagrees with ReadNpyFile");
  if (h.kind != 'f') {
    int64_t sum = 0;
    for (int64_t i = 0; i < *n; ++i) sum ^= worker::NpyIntegerAt(*a, i);
    (void)sum;
  }
  return 0;
}
