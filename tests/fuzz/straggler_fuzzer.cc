// The straggler grammar (worker/straggler.h): --straggler RANK:DELAY, --straggler-dist
// exp:MEAN|uniform:LO:HI, --slow-workers K:FACTOR and the durations inside them (ParseDuration),
// which the launcher checks and every worker parses. Byte 0 picks the worker count (1..16); the
// rest is the three flag values separated by newlines. Errors are kInvalidArgument. A plan that
// parses gives every worker, at every step, a delay the trainer can sleep for: finite,
// non-negative, and within what std::this_thread::sleep_for converts to nanoseconds.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_util.h"
#include "worker/straggler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace towerps;
  if (size == 0) return 0;
  const int workers = 1 + data[0] % 16;
  std::vector<std::string> flags(3);
  size_t field = 0;
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == '\n' && field < 2) {
      ++field;
    } else {
      flags[field] += static_cast<char>(data[i]);
    }
  }
  const Result<double> d = worker::ParseDuration(flags[0], "--fuzz");
  if (d.ok()) {
    FUZZ_CHECK(std::isfinite(*d) && *d >= 0, "duration " + flags[0] + " = " + std::to_string(*d));
  } else {
    FUZZ_CHECK(d.status().code() == StatusCode::kInvalidArgument, d.status().ToString());
  }
  const Result<worker::StragglerPlan> plan =
      worker::StragglerPlan::Parse(flags[0], flags[1], flags[2], workers);
  if (!plan.ok()) {
    FUZZ_CHECK(plan.status().code() == StatusCode::kInvalidArgument, plan.status().ToString());
    return 0;
  }
  // The trainer measures its compute time; a second per step is a slow but real one.
  for (const double compute : {0.0, 1.0}) {
    for (int rank = 0; rank < workers; ++rank) {
      for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{1} << 40}) {
        const double delay = plan->DelaySeconds(rank, step, 42, compute);
        FUZZ_CHECK(std::isfinite(delay) && delay >= 0 && delay < 9.2e9,
                   "worker " + std::to_string(rank) + " would sleep " + std::to_string(delay) +
                       " s, which std::chrono::nanoseconds cannot hold");
      }
    }
  }
  return 0;
}
