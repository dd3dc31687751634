// CIFAR-10 binary batches (data_batch_1.bin .. data_batch_5.bin, test_batch.bin): records of one
// label byte then 3072 pixel bytes (3 x 32 x 32, CHW).
//
// Contract: kNotFound naming a missing file; kCorruption naming the file for an empty file, a size
// that is not a whole number of 3073-byte records (a truncated file), or a label >= 10.
// Thread-compatible.
#ifndef TOWERPS_WORKER_DATA_CIFAR10_READER_H_
#define TOWERPS_WORKER_DATA_CIFAR10_READER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "towerps/dataset.h"
#include "towerps/result.h"
#include "worker/data/fashion_mnist.h"

namespace towerps::worker {

inline constexpr int kCifar10RecordBytes = 1 + 3 * 32 * 32;

// Appends the records of one batch file's `bytes` to `d` (labels, then CHW pixels), naming `name`
// in errors. On error `d` is unchanged.
Status AppendCifar10Records(const std::string& name, std::span<const uint8_t> bytes, Dataset& d);

// Reads and concatenates the given batch files.
Result<Dataset> ReadCifar10Batches(const std::vector<std::string>& paths);

// The five training batches or the test batch from `data_dir`.
Result<Dataset> LoadCifar10(const std::string& data_dir, Split split);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_DATA_CIFAR10_READER_H_
