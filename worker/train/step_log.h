// StepLog: what a worker's steps took, and the step lines it reports.
//
// Each step records its loss and its seconds waiting for parameters, of injected delay and of
// compute; every --log-every steps the window since the last line becomes one step line on the
// console and one --metrics-out record (loss, examples per second, staleness, seconds per batch,
// wait and delay per step), and the totals feed the summary.
//
// Contract: value type, used by the training thread only.
#ifndef TOWERPS_WORKER_TRAIN_STEP_LOG_H_
#define TOWERPS_WORKER_TRAIN_STEP_LOG_H_

#include <chrono>
#include <cstdint>

#include "worker/train/console.h"
#include "worker/train/metrics_log.h"
#include "worker/train/summary.h"

namespace towerps::worker {

struct StepTimes {
  double loss = 0;
  double wait = 0;     // seconds waiting for this step's parameters
  double delay = 0;    // seconds of injected delay
  double compute = 0;  // seconds in TowerGroup::Step
};

class StepLog {
 public:
  using Clock = std::chrono::steady_clock;
  StepLog(int log_every, int batch_size) : log_every_(log_every), batch_size_(batch_size) {}

  // Counts a computed step's seconds in the totals (before its pushes are awaited, so that a
  // step that diverges counts too).
  void Count(const StepTimes& t);
  // Records a finished iteration `iter` (counted from 1), reported as step `step` of epoch
  // `epoch`; writes the step line and the metrics record when `iter` is a multiple of
  // --log-every.
  void Record(const StepTimes& t, int64_t iter, int64_t step, int64_t epoch, double staleness,
              const ConsoleProgress& console, MetricsLog& metrics);

  const StepTimes& totals() const { return totals_; }  // loss: the last recorded step's
  // The summary's fields known once training stops after `steps` steps of `seconds`; the test
  // fields are NaN on the chief until it evaluates.
  TrainingSummary Summary(double seconds, int64_t steps, int64_t steps_per_epoch, double last_loss,
                          bool chief) const;

 private:
  const int log_every_;
  const int batch_size_;
  StepTimes totals_;
  // The steps since the last line.
  Clock::time_point window_start_ = Clock::now();
  int64_t window_steps_ = 0;
  StepTimes window_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_STEP_LOG_H_
