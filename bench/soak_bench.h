// Soak: a sync job (1 server, 2 workers) started through towerps-launch runs for `minutes`, with
// as many epochs as fit, while every process's resident memory (VmRSS in /proc/PID/status: the
// server, the workers and the launcher) is sampled every `sample_interval`. Growth is the
// largest RSS in the final window (the last `window_fraction` of the run) over the largest in the
// warm-up (the first `window_fraction`), per process; the soak passes when no process grew by
// more than `max_growth_percent`. Every worker sleeps `step_delay` per step (the straggler
// injection), so the job uses a fraction of a core and can run beside other work.
//
// Contract: starts the launcher as a child in this process's group (a terminal's Ctrl-C reaches
// it too) and always stops it, with SIGTERM and then SIGKILL, before returning; its log and the
// job's logs are in the run directory, which is kept when the soak fails or is named. Blocks
// for about `minutes` plus start-up and shutdown. Errors: kInvalidArgument for bad options,
// kNotFound for a missing launcher, kFailedPrecondition when the job ends or a process disappears
// before the time is up (with the launcher's last lines), kTimeout when it does not start within a
// minute, kCancelled when *interrupt becomes non-zero.
// A growth verdict is a result (passed), not an error.
#ifndef TOWERPS_BENCH_SOAK_BENCH_H_
#define TOWERPS_BENCH_SOAK_BENCH_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps::bench {

struct SoakOptions {
  double minutes = 60;
  std::chrono::milliseconds sample_interval{10000};
  double max_growth_percent = 1.0;
  double window_fraction = 0.2;  // warm-up and final window, each as a share of the run
  std::string model = "mlp";
  std::string dataset = "synthetic";
  int batch_size = 32;                       // per worker
  std::chrono::milliseconds step_delay{20};  // slept by every worker every step; 0: none
  std::string launcher_binary;               // towerps-launch; empty: next to this executable
  std::string run_dir;  // empty: a fresh temporary directory, removed when the soak passes
  std::vector<std::string> launcher_args;            // appended to towerps-launch's command line
  std::function<void(const std::string&)> progress;  // one line per sample; may be empty
  const std::atomic<int>* interrupt = nullptr;       // borrowed; non-zero: stop now
};

struct SoakProcess {
  std::string name;  // ps:0, worker:0, worker:1, launch
  int pid = 0;
  std::vector<long> rss_kib;  // one per sample
  long baseline_kib = 0;      // largest in the warm-up
  long final_kib = 0;         // largest in the final window
  long peak_kib = 0;          // largest overall
  long growth_kib = 0;        // final_kib - baseline_kib
  double growth_percent = 0;  // growth_kib / baseline_kib * 100
  double cpu_percent = 0;     // mean use of one core over the sampled time
};

struct SoakResult {
  std::vector<double> sample_seconds;  // since the first sample
  std::vector<SoakProcess> processes;
  double warmup_seconds = 0;      // samples at or before this are the warm-up
  double final_from_seconds = 0;  // samples at or after this are the final window
  int epochs = 0;                 // epochs the chief finished
  std::string worst;              // the process with the largest growth_percent
  double worst_growth_percent = 0;
  bool passed = false;  // worst_growth_percent <= max_growth_percent
  std::string run_dir;  // where the logs are ("" once removed)
};

Result<SoakResult> RunSoak(const SoakOptions& options);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_SOAK_BENCH_H_
