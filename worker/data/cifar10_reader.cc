#include "worker/data/cifar10_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace towerps::worker {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

Status AppendBatch(const std::string& path, Dataset& d) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (!f) {
    return errno == ENOENT ? NotFoundError(path + ": " + std::strerror(errno))
                           : IoError(path + ": cannot open: " + std::strerror(errno));
  }
  std::vector<uint8_t> bytes;
  uint8_t block[1 << 16];
  size_t got;
  while ((got = std::fread(block, 1, sizeof(block), f.get())) > 0) {
    bytes.insert(bytes.end(), block, block + got);
  }
  if (std::ferror(f.get())) return IoError(path + ": read failed");
  return AppendCifar10Records(path, bytes, d);
}

}  // namespace

Status AppendCifar10Records(const std::string& name, std::span<const uint8_t> bytes, Dataset& d) {
  if (bytes.empty()) return CorruptionError(name + ": empty file, expected CIFAR-10 records");
  if (bytes.size() % kCifar10RecordBytes != 0) {
    return CorruptionError(name + ": truncated: " + std::to_string(bytes.size()) +
                           " bytes is not a whole number of " +
                           std::to_string(kCifar10RecordBytes) + "-byte CIFAR-10 records");
  }
  const size_t records = bytes.size() / kCifar10RecordBytes;
  for (size_t r = 0; r < records; ++r) {
    const uint8_t label = bytes[r * kCifar10RecordBytes];
    if (label >= 10) {
      return CorruptionError(name + ": record " + std::to_string(r) + " has label " +
                             std::to_string(label) + ", not below 10 (is this a CIFAR-100 file?)");
    }
  }
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* rec = bytes.data() + r * kCifar10RecordBytes;
    d.labels.push_back(rec[0]);
    d.pixels.insert(d.pixels.end(), rec + 1, rec + kCifar10RecordBytes);
  }
  return Status::Ok();
}

Result<Dataset> ReadCifar10Batches(const std::vector<std::string>& paths) {
  Dataset d;
  d.name = paths.empty() ? "cifar10" : paths.front();
  d.example_shape = {3, 32, 32};
  d.num_classes = 10;
  if (paths.empty()) return InvalidArgumentError("no CIFAR-10 batch files given");
  for (const std::string& p : paths) {
    if (Status st = AppendBatch(p, d); !st.ok()) return st;
  }
  return d;
}

Result<Dataset> LoadCifar10(const std::string& data_dir, Split split) {
  std::vector<std::string> paths;
  if (split == Split::kTrain) {
    for (int i = 1; i <= 5; ++i)
      paths.push_back(data_dir + "/data_batch_" + std::to_string(i) + ".bin");
  } else {
    paths.push_back(data_dir + "/test_batch.bin");
  }
  return ReadCifar10Batches(paths);
}

}  // namespace towerps::worker
