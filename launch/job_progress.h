// JobProgress: towerps-launch's one progress bar for the whole job, on a terminal. The chief
// (worker 0, started with --progress-lines) prints "@progress {json}" lines (worker/train/
// console.h) with the steps done, the total, the steps per epoch, the last loss and the last
// test accuracy; the launcher consumes them and draws
//   epoch 2/5 [=====>          ] 700/2340 41.2k ex/s ETA 0:04 loss 0.3121 acc 0.8494
// below the scrolling log lines, as Keras and tqdm do: every line printed through Print() first
// clears the bar, then the bar is drawn again under it. Examples per second and the ETA come
// from the steps the chief reported over the time since its first report.
//
// Contract: one owner thread (the launcher's). Writes the bar to stdout, cut to the terminal's
// width so it never wraps. Not enabled, Consume() takes nothing and Print() only prints.
#ifndef TOWERPS_LAUNCH_JOB_PROGRESS_H_
#define TOWERPS_LAUNCH_JOB_PROGRESS_H_

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace towerps::launch {

class JobProgress {
 public:
  // `examples_per_step`: examples the whole job processes per step the chief reports (sync:
  // batch x gradients per step; async and SSP: batch x workers, as every worker steps too).
  JobProgress(bool enabled, int64_t examples_per_step);
  bool enabled() const { return enabled_; }

  // One line of the chief's output: true when it was a progress line, now consumed (neither
  // printed nor logged). A malformed one is consumed and ignored.
  bool Consume(std::string_view line);
  // Writes `text` (whole lines) to `stream`, above the bar.
  void Print(std::FILE* stream, std::string_view text);
  // Removes the bar for good (the job is over).
  void Finish();

  // The bar for the last report, `width` columns at most; "" before any. Exposed for tests;
  // `now` is when it is drawn.
  std::string BarText(std::chrono::steady_clock::time_point now, int width) const;

 private:
  void Draw();
  void Erase();

  struct Report {
    int64_t step = 0, steps = 0, steps_per_epoch = 1;
    double loss = 0;
    std::optional<double> accuracy;
  };
  bool enabled_;
  int64_t examples_per_step_;
  std::optional<Report> last_;
  int64_t first_step_ = 0;
  std::chrono::steady_clock::time_point first_time_;
  bool drawn_ = false;
};

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_JOB_PROGRESS_H_
