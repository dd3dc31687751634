// A towerps-launch job run by a benchmark: started as a subprocess, bounded in time, and read
// back through its chief's summary (--summary-out).
//
// Contract: blocks until the job ended or `timeout` passed (then it is killed); a failed job is
// an error naming its log. Thread-compatible: no shared state.
#ifndef TOWERPS_BENCH_LAUNCHED_JOB_H_
#define TOWERPS_BENCH_LAUNCHED_JOB_H_

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps::bench {

// Runs `launcher` with `args` plus --run-dir and --summary-out under `dir` (created; the log is
// dir/launch.log); returns the chief's examples_per_sec. `what` names the job in errors.
Result<double> RunLaunchedJob(const std::string& launcher, const std::vector<std::string>& args,
                              const std::filesystem::path& dir, std::chrono::seconds timeout,
                              const std::string& what);

// The launcher beside this binary unless `given` names one; an error when it is missing.
Result<std::string> FindLauncher(const std::string& given);

double Median(std::vector<double> v);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_LAUNCHED_JOB_H_
