// The IDX reader (worker/data/idx_reader.h), which reads the MNIST-format files --data-dir,
// --train-images and friends point at, plain or gzip-compressed. The input is the file (through
// an in-memory file: the reader takes a path). An array that loads holds exactly the bytes its
// dimensions declare, and reading the header alone gives the same dimensions.
#include <cstdint>

#include "tests/fuzz/fuzz_util.h"
#include "worker/data/idx_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = towerps::fuzz::MemFile::Get().Write(data, size);
  towerps::Result<towerps::worker::IdxArray> full = towerps::worker::ReadIdxFile(path);
  towerps::Result<towerps::worker::IdxArray> header = towerps::worker::ReadIdxFile(path, true);
  if (!full.ok()) {
    FUZZ_CHECK(full.status().code() == towerps::StatusCode::kCorruption,
               "unexpected error kind: " + full.status().ToString());
    return 0;
  }
  FUZZ_CHECK(header.ok(), "the file reads but its header does not: " + header.status().ToString());
  FUZZ_CHECK(header->dims == full->dims, "the header alone gives other dimensions");
  FUZZ_CHECK(header->data.empty(), "header_only read data");
  uint64_t expected = 1;
  for (int64_t d : full->dims) expected *= static_cast<uint64_t>(d);
  FUZZ_CHECK(full->data.size() == expected, "data size differs from the product of the dims");
  return 0;
}
