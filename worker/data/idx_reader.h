// Reader for IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed.
//
// Format: two zero bytes, a type byte (0x08 = unsigned byte), a rank byte, then `rank` big-endian
// uint32 dimensions, then the elements in row-major order.
//
// Contract: reads the whole file; returns kNotFound for a missing file and kCorruption, naming the
// file and what is wrong, for a bad magic number, an unsupported type, a truncated file or
// trailing bytes. Memory grows with the bytes actually read, never with what a header declares.
// Thread-compatible.
#ifndef TOWERPS_WORKER_DATA_IDX_READER_H_
#define TOWERPS_WORKER_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps::worker {

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;  // row-major, prod(dims) bytes
};

// header_only: stop after the dimensions (data stays empty); nothing past them is checked.
Result<IdxArray> ReadIdxFile(const std::string& path, bool header_only = false);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_IDX_READER_H_
