// Divergence: one worker's record of how its training went wrong: a non-finite value, or a
// collapse to chance (worker/train/collapse.h). Each step, every variable's averaged gradient is
// checked once, on the tower thread that hands it on; after the step the trainer asks whether
// anything was non-finite, which records the first divergence (its kind, what, and at which
// step) and says whether training stops on it (--on-nonfinite fail). A collapse is recorded the
// same way. The record goes into the worker's summary.
//
// Contract: owned by the trainer. CheckGradient(v) may run on several tower threads at once for
// different variables; everything else runs on the training thread, after Step returned.
#ifndef TOWERPS_WORKER_TRAIN_DIVERGENCE_H_
#define TOWERPS_WORKER_TRAIN_DIVERGENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/tensor.h"
#include "worker/train/summary.h"
#include "worker/worker_options.h"

namespace towerps::worker {

class Divergence {
 public:
  // `rank`: this worker's; `names`: the variables', for messages.
  Divergence(OnNonFinite policy, int rank, std::vector<std::string> names);

  // Notes where variable v's gradient for this step is not finite (one read of it). Returns
  // whether it may be pushed: finite, or --on-nonfinite continue (the servers refuse it).
  bool CheckGradient(int v, const Tensor& gradient);
  // This step's gradient of variable v was not finite.
  bool GradientWasNonFinite(int v) const { return nonfinite_at_[v] >= 0; }
  // After a step: records the first divergence (a non-finite loss or gradient at `step`);
  // returns whether training stops on it.
  bool StopsAfterStep(double loss, int64_t step);
  // The model collapsed to chance at `step` (`what` shows it); the first divergence if none came
  // before. Returns whether training stops on it.
  bool StopsOnCollapse(const std::string& what, int64_t step);
  // A push the servers refused as non-finite.
  void CountRefused() { ++refused_; }
  // diverged, divergence_kind, diverged_at_step, diverged_worker, divergence,
  // nonfinite_dropped.
  void Fill(TrainingSummary* s) const;

 private:
  // Records the first divergence; returns whether training stops on it.
  bool Record(const char* kind, const std::string& what, int64_t step);
  // What is non-finite in this step: the loss, else the first variable's gradient that is;
  // "" when everything is finite.
  std::string NonFiniteIn(double loss) const;

  const OnNonFinite policy_;
  const int rank_;
  const std::vector<std::string> names_;
  // This step's check, per variable: the first non-finite element (-1: none) and its value;
  // each written by the tower thread that hands that variable on.
  std::vector<int64_t> nonfinite_at_;
  std::vector<float> nonfinite_value_;
  bool diverged_ = false;
  int64_t diverged_at_step_ = -1;
  const char* kind_ = "";   // "nonfinite" or "collapse"
  std::string divergence_;  // what went wrong first, e.g. "loss = nan"
  uint64_t refused_ = 0;    // this worker's pushes the servers refused as non-finite
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_DIVERGENCE_H_
