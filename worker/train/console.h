// ConsoleProgress: what a worker prints on its standard output while it trains: the
// TensorFlow-style step line every --log-every steps and, when stdout is a terminal, a progress
// bar per epoch that the next line overwrites.
//
// Contract: owned by the training thread; writes to stdout and flushes each line.
#ifndef TOWERPS_WORKER_TRAIN_CONSOLE_H_
#define TOWERPS_WORKER_TRAIN_CONSOLE_H_

#include <cstdint>

namespace towerps::worker {

class ConsoleProgress {
 public:
  explicit ConsoleProgress(int64_t steps_per_epoch);

  // Redraws the bar at `step_in_epoch` (1-based) of `epoch` (0-based); nothing without a tty.
  void Bar(int64_t step_in_epoch, int64_t epoch) const;
  // "step S, loss = L (E examples/sec; T sec/batch)".
  void StepLine(int64_t step, double loss, double examples_per_sec, double sec_per_batch) const;

 private:
  int64_t steps_per_epoch_;
  bool tty_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_CONSOLE_H_
