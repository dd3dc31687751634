// Reader for NumPy .npy files (format versions 1.0, 2.0 and 3.0), as np.save writes them.
//
// Format: the magic "\x93NUMPY", a major and a minor version byte, the header length
// (little-endian, 2 bytes in version 1, 4 in versions 2 and 3), then a Python dict literal such
// as {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), } and the C-order data.
//
// Contract: accepts little-endian (or byte-sized) bool-free numeric types: float32 ('<f4'),
// float64 ('<f8'), and signed or unsigned integers of 1, 2, 4 and 8 bytes. Every problem is a
// kCorruption (or kNotFound / kIoError) naming the file and what is wrong: a bad magic or
// version, a header that is not such a dict, an unsupported dtype, fortran_order True, or a
// shape that disagrees with the file's size. Never reads past the file. Thread-safe.
#ifndef TOWERPS_WORKER_DATA_NPY_READER_H_
#define TOWERPS_WORKER_DATA_NPY_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "towerps/result.h"
#include "towerps/shape.h"

namespace towerps::worker {

struct NpyHeader {
  std::string descr;  // as written, e.g. "<f4"
  char kind = 'f';    // 'f' float, 'i' signed, 'u' unsigned integer
  int item_size = 4;  // bytes per element
  Shape shape;
  uint64_t data_offset = 0;  // where the data starts
};

// Parses the header (magic, version, dict) of the bytes `text` read from `path` (for messages).
Result<NpyHeader> ParseNpyHeader(const std::string& path, const std::string& bytes);

// Reads and checks the header only (and that the file's size matches the shape).
Result<NpyHeader> ReadNpyHeader(const std::string& path);

struct NpyArray {
  NpyHeader header;
  std::vector<uint8_t> data;  // NumElements(shape) * item_size bytes, little-endian
};
Result<NpyArray> ReadNpyFile(const std::string& path);

// Element i of an integer array as int64 (the caller checks the range it needs).
int64_t NpyIntegerAt(const NpyArray& array, int64_t i);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_NPY_READER_H_
