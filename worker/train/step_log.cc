#include "worker/train/step_log.h"

#include <cmath>

namespace towerps::worker {

void StepLog::Count(const StepTimes& t) {
  totals_.wait += t.wait;
  totals_.delay += t.delay;
  totals_.compute += t.compute;
}

void StepLog::Record(const StepTimes& t, int64_t iter, int64_t step, int64_t epoch,
                     double staleness, const ConsoleProgress& console, MetricsLog& metrics) {
  totals_.loss = t.loss;
  window_.loss += t.loss;
  window_.wait += t.wait;
  window_.delay += t.delay;
  ++window_steps_;
  if (iter % log_every_ != 0) return;
  const double n = static_cast<double>(window_steps_);
  const double secs = std::chrono::duration<double>(Clock::now() - window_start_).count();
  const double eps = n * batch_size_ / secs;
  console.StepLine(step, window_.loss / n, eps, secs / n);
  metrics.Train(step, epoch, window_.loss / n, eps, staleness, secs / n, window_.wait / n,
                window_.delay / n);
  window_ = StepTimes{};
  window_steps_ = 0;
  window_start_ = Clock::now();
}

TrainingSummary StepLog::Summary(double seconds, int64_t steps, int64_t steps_per_epoch,
                                 double last_loss, bool chief) const {
  TrainingSummary s;
  if (chief) {  // not evaluated unless training ends
    s.test_accuracy = std::nan("");
    s.test_loss = std::nan("");
  }
  s.train_seconds = seconds;
  s.wait_seconds = totals_.wait;
  s.compute_seconds = totals_.compute;
  s.injected_delay_seconds = totals_.delay;
  s.epochs = static_cast<double>(steps) / static_cast<double>(steps_per_epoch);
  s.steps = steps;
  s.final_train_loss = last_loss;
  return s;
}

}  // namespace towerps::worker
