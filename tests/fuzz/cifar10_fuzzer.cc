// The CIFAR-10 batch reader (worker/data/cifar10_reader.h: AppendCifar10Records, what
// ReadCifar10Batches does with each file's bytes). A batch that loads gives one label below 10
// and 3072 pixels per 3073-byte record, copied from the input in order; one that fails leaves the
// dataset as it was.
#include <cstdint>
#include <cstring>

#include "tests/fuzz/fuzz_util.h"
#include "worker/data/cifar10_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using towerps::worker::kCifar10RecordBytes;
  towerps::Dataset d;
  d.labels = {3};  // a batch read before this one
  d.pixels.assign(kCifar10RecordBytes - 1, 7);
  const towerps::Status st =
      towerps::worker::AppendCifar10Records("fuzz.bin", std::span<const uint8_t>(data, size), d);
  const size_t records = size / kCifar10RecordBytes;
  if (!st.ok()) {
    FUZZ_CHECK(st.code() == towerps::StatusCode::kCorruption,
               "unexpected error kind: " + st.ToString());
    FUZZ_CHECK(d.labels.size() == 1 && d.pixels.size() == kCifar10RecordBytes - 1,
               "a failed batch changed the dataset");
    return 0;
  }
  FUZZ_CHECK(size % kCifar10RecordBytes == 0 && records > 0, "accepted a partial record");
  FUZZ_CHECK(d.labels.size() == 1 + records, "label count");
  FUZZ_CHECK(d.pixels.size() == (1 + records) * (kCifar10RecordBytes - 1), "pixel count");
  for (size_t r = 0; r < records; ++r) {
    const uint8_t* rec = data + r * kCifar10RecordBytes;
    FUZZ_CHECK(d.labels[1 + r] == rec[0] && rec[0] < 10, "label of record " + std::to_string(r));
    FUZZ_CHECK(std::memcmp(d.pixels.data() + (1 + r) * (kCifar10RecordBytes - 1), rec + 1,
                           kCifar10RecordBytes - 1) == 0,
               "pixels of record " + std::to_string(r));
  }
  return 0;
}
