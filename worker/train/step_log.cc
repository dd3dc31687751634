#include "worker/train/step_log.h"

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

}  // namespace towerps::worker
