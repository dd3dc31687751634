// The Criteo click-log reader (worker/data/criteo_reader.h), which --dataset criteo runs on the
// user's files. The input is the file (through an in-memory file: the reader takes a path), read
// strictly and with --skip-bad-lines. A file that loads holds finite, non-negative dense features
// (log(1 + max(x, 0))), 0/1 labels and 26 ids per example, one example per line not skipped; a
// strict read fails only with kInvalidArgument naming the file and line, and succeeds exactly
// when the lenient read skips nothing.
#include <cmath>
#include <cstdint>

#include "tests/fuzz/fuzz_util.h"
#include "worker/data/criteo_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace towerps;
  const std::string& path = fuzz::MemFile::Get().Write(data, size);
  worker::CriteoReadStats stats;
  Result<Dataset> lenient = worker::ReadCriteoFile(path, "fuzz", {.skip_bad_lines = true}, &stats);
  Result<Dataset> strict = worker::ReadCriteoFile(path, "fuzz", {}, nullptr);
  if (!strict.ok()) {
    FUZZ_CHECK(strict.status().code() == StatusCode::kInvalidArgument,
               "unexpected error kind: " + strict.status().ToString());
    FUZZ_CHECK(strict.status().message().rfind(path + ":", 0) == 0, "no file and line named");
  }
  FUZZ_CHECK(strict.ok() == (lenient.ok() && stats.skipped == 0),
             "strict and lenient reads disagree");
  if (!lenient.ok()) {
    FUZZ_CHECK(lenient.status().code() == StatusCode::kInvalidArgument,
               "unexpected error kind: " + lenient.status().ToString());
    return 0;
  }
  const Dataset& d = *lenient;
  const int64_t n = d.size();
  FUZZ_CHECK(n == stats.lines - stats.skipped, "examples != lines not skipped");
  FUZZ_CHECK(d.values.size() == static_cast<size_t>(n) * 13, "dense size");
  FUZZ_CHECK(d.ids.size() == static_cast<size_t>(n) * 26, "ids size");
  for (int32_t l : d.labels) FUZZ_CHECK(l == 0 || l == 1, "label " + std::to_string(l));
  for (float v : d.values) FUZZ_CHECK(std::isfinite(v) && v >= 0.0f, "dense " + std::to_string(v));
  FUZZ_CHECK(d.Validate().ok(), d.Validate().ToString());
  return 0;
}
