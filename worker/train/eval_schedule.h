// EvalSchedule: when the chief evaluates on the test set while it trains. --evals-per-epoch K
// puts K evaluation points in every epoch, at the first step at or past j/K of it (j = 1..K),
// the last one at the epoch's end; K = 1 is once per epoch, at its end.
//
// Progress counts the steps done (sync: global steps; async, SSP, softsync: the chief's own
// iterations). A point passed between two calls, or several, fire once: the chief evaluates
// at most once per step.
//
// Contract: a value type owned by the training thread; no errors (the flag's range is checked
// by WorkerOptions::Validate, and a K above the steps per epoch fires at every step).
#ifndef TOWERPS_WORKER_TRAIN_EVAL_SCHEDULE_H_
#define TOWERPS_WORKER_TRAIN_EVAL_SCHEDULE_H_

#include <algorithm>
#include <cstdint>

namespace towerps::worker {

class EvalSchedule {
 public:
  // `start`: the progress training resumes from; points at or before it do not fire.
  EvalSchedule(int64_t steps_per_epoch, int evals_per_epoch, int64_t start)
      : steps_per_epoch_(std::max<int64_t>(steps_per_epoch, 1)),
        per_epoch_(std::clamp<int64_t>(evals_per_epoch, 1, steps_per_epoch_)),
        last_(Index(start)) {}

  // True when an evaluation point lies in (the last one that fired, progress]; it fires.
  bool Due(int64_t progress) {
    const int64_t index = Index(progress);
    if (index <= last_) return false;
    last_ = index;
    return true;
  }

  // Whether `progress` is the end of an epoch (the point that also reports the epoch).
  bool EndsEpoch(int64_t progress) const { return progress % steps_per_epoch_ == 0; }

 private:
  // The number of evaluation points in [1, progress].
  int64_t Index(int64_t progress) const {
    return progress / steps_per_epoch_ * per_epoch_ +
           progress % steps_per_epoch_ * per_epoch_ / steps_per_epoch_;
  }

  int64_t steps_per_epoch_;
  int64_t per_epoch_;
  int64_t last_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_EVAL_SCHEDULE_H_
