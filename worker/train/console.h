// ConsoleProgress: what a worker prints on its standard output while it trains.
//  - The TensorFlow-style step line every --log-every steps, prefixed like the log lines
//    ("[worker:3] step 200, loss = ..."), so that every line says where it came from under
//    mpirun and srun, which merge the ranks' output, as under towerps-launch (whose relay leaves
//    a prefixed line alone).
//  - A progress bar per epoch that the next line overwrites, only when stdout is a terminal and
//    ConsoleOptions::bar (towerps-worker --no-progress-bar turns it off; towerps-launch's
//    process-per-rank modes do, as mpirun gives ranks a terminal they share). Without it no '\r'
//    is ever written.
//  - On the chief under towerps-launch on a terminal (ConsoleOptions::progress_lines):
//    "@progress {json}" lines, at most 10 a second and at every evaluation, which the launcher
//    consumes to draw one bar for the whole job (launch/job_progress.h). They replace the bar.
//
// Contract: owned by the training thread; writes to stdout and flushes each line.
#ifndef TOWERPS_WORKER_TRAIN_CONSOLE_H_
#define TOWERPS_WORKER_TRAIN_CONSOLE_H_

#include <chrono>
#include <cstdint>
#include <string>

namespace towerps::worker {

struct ConsoleOptions {
  bool bar = true;
  bool progress_lines = false;
};

// The prefix of progress lines on the chief's stdout.
inline constexpr char kProgressLinePrefix[] = "@progress ";

class ConsoleProgress {
 public:
  ConsoleProgress(int64_t steps_per_epoch, int64_t total_steps, ConsoleOptions options);

  // After a step: `done` steps of the job are done (sync: global steps; async/SSP: this
  // worker's iterations), the last with `loss`. Redraws the bar, or sends a progress line.
  void Step(int64_t done, double loss);
  // After the chief's evaluation at the end of an epoch.
  void Evaluated(int64_t done, double accuracy);
  // "step S, loss = L (E examples/sec; T sec/batch)".
  void StepLine(int64_t step, double loss, double examples_per_sec, double sec_per_batch) const;
  // A line of `text` on stdout with the process's prefix (the final accuracy, the summary).
  static void Line(const std::string& text);

 private:
  void SendProgress(int64_t done);

  int64_t steps_per_epoch_, total_steps_;
  ConsoleOptions options_;
  bool bar_;
  double last_loss_ = 0, last_accuracy_ = -1;
  std::chrono::steady_clock::time_point last_sent_{};
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_CONSOLE_H_
