// TOWERPS_WORKER_ARGS, what towerps-launch --worker-cmd gives a PyTorch worker
// (python/session_options.h): a JSON array of the worker's flags, read by WorkerArgsFromJson and
// parsed by ParseSessionArgs with the native worker's flag tables. Errors must be
// kInvalidArgument (or kIoError: a --secret-file that cannot be read); options that parse must
// keep the parser's promises (a rank inside the job, servers named, a valid job configuration).
#include <cstdint>
#include <string>
#include <vector>

#include "python/session_options.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace towerps;
  const std::string json(reinterpret_cast<const char*>(data), size);
  Result<std::vector<std::string>> args = python::WorkerArgsFromJson(json);
  if (!args.ok()) {
    FUZZ_CHECK(args.status().code() == StatusCode::kInvalidArgument, "the JSON's error");
    return 0;
  }
  Result<python::SessionOptions> o = python::ParseSessionArgs(*args, "");
  if (!o.ok()) {
    const StatusCode code = o.status().code();
    FUZZ_CHECK(code == StatusCode::kInvalidArgument || code == StatusCode::kIoError,
               "the flags' error");
    return 0;
  }
  FUZZ_CHECK(o->rank >= 0 && o->rank < o->job.workers, "the rank inside --workers");
  FUZZ_CHECK(!o->ps_endpoints.empty(), "servers named");
  FUZZ_CHECK(o->job.Validate().ok(), "a valid job");
  return 0;
}
