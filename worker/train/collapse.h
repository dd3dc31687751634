// Collapse: a model that left chance and fell back to it. A rate too high for its mode (async
// at --lr-scaling none, say) can kill every ReLU of a network without a NaN: the outputs become
// constant, the loss settles at the loss of a constant guess (ln 10 for 10 balanced classes),
// the accuracy at the majority class's share, and the job would end "cleanly" at chance. This
// watch tells such a run from a healthy one, so that it is reported as diverged (worker/train/
// divergence.h) like a NaN.
//
// A run has collapsed when, after it left chance (a training step's loss below 0.9 of the
// constant guess's loss, or, after its first 10 steps, above twice it and three times where it
// began; or an evaluation's accuracy more than 0.02 above the majority class's share, which
// catches a job whose loss blew up within its first steps and fell back), and after at least
// `window` steps:
//  - at an evaluation, the test accuracy is within 0.02 of the majority class's share and the
//    test loss within 1% of the constant guess's loss, or above it, while the training loss
//    (the median of the last `window` steps) is no lower than 0.9 of its own constant guess's
//    (a model that fits its training batches but not the test set has not collapsed); or
//  - over the last `window` steps, the training loss is pinned there: its median within 1% of
//    the constant guess's loss and its interquartile range under 1% of it (a constant output
//    scores every batch alike; a learning model's losses spread).
// A binary model (a click model: its evaluations give a ROC AUC) is judged by what it ranks, not
// by its log loss, which a model with poor calibration but good ranking can push above a
// constant guess's: it left chance once an evaluation's AUC passed 0.5 + 0.02, and has collapsed
// when, after that, an evaluation's AUC is back within 0.02 of 0.5 and its outputs are constant
// (their standard deviation under 0.001).
// Without the first condition a model that never learned (a rate too small, a few steps, labels
// that say nothing) is not a collapse: LeftChance() says so, for the summary to report it apart.
// The watch also warns, as it happens, when the loss grows far above where it began (3x, then 9x,
// ...).
//
// Contract: owned by the trainer and used on its training thread; not thread-safe. Classes
// only: a model whose labels are not classes has no chance level, and the watch stays silent.
#ifndef TOWERPS_WORKER_TRAIN_COLLAPSE_H_
#define TOWERPS_WORKER_TRAIN_COLLAPSE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace towerps::worker {

// What guessing without looking at the input scores on a set of labels.
struct ChanceLevel {
  int classes = 0;
  double majority_share = 0;  // the accuracy of always answering the most frequent class
  // The cross-entropy of always answering the label frequencies: their entropy (ln classes
  // when they are balanced; no constant guess does better).
  double constant_loss = 0;
  // "ln 10 = 2.3026" for balanced classes, otherwise "2.2817, the entropy of the labels".
  std::string Describe() const;
};

// The chance level of `labels`, each in [0, classes).
ChanceLevel ChanceLevelOf(const std::vector<int32_t>& labels, int classes);
// The same from the count of each class (a streamed split's, counted as it was read).
ChanceLevel ChanceLevelOfCounts(const std::vector<int64_t>& counts, int classes);

class CollapseWatch {
 public:
  CollapseWatch(ChanceLevel train, ChanceLevel test, int window = 50);

  // After each training step. Returns what shows the collapse, e.g. "the training loss sat at
  // 2.3041 (median of steps 151-200), the loss of a constant guess (ln 10 = 2.3026)", once the
  // window shows one; logs a warning when the loss grows far above its start.
  std::optional<std::string> Step(int64_t step, double loss);
  // At an evaluation of the test set: the same, e.g. "test accuracy 0.1000, test loss 2.3034,
  // the loss of a constant guess (ln 10 = 2.3026)". An accuracy above chance is noted as the
  // model having left it. A binary model's evaluation passes its `auc` and `output_spread` (the
  // standard deviation of its probabilities); -1: not a binary model.
  std::optional<std::string> Evaluated(double accuracy, double loss, double auc = -1,
                                       double output_spread = -1);

  // Whether the model has left chance yet: by its AUC once an evaluation gave one, else by its
  // losses and accuracy.
  bool left_chance() const { return by_auc_ ? auc_left_ : left_chance_; }
  // After the last evaluation, for the summary: whether the model ever left chance (false: it
  // did not learn, which is not a divergence), and what shows it, e.g. "test AUC 0.5012 (chance
  // is 0.5)". Nothing for labels without classes.
  std::optional<bool> LeftChance() const;
  std::string NotLearning() const { return last_evaluation_; }

 private:
  const ChanceLevel train_, test_;
  const int window_;
  std::deque<double> recent_;  // the last `window_` steps' losses
  bool left_chance_ = false;   // by the losses and accuracy
  bool by_auc_ = false;        // an evaluation gave an AUC: judged by it
  bool auc_left_ = false;
  std::string last_evaluation_;  // the last evaluation, described
  std::vector<double> first_;    // the first steps' losses
  double began_ = 0;             // their median: where the loss began
  double warn_above_ = 0;        // the next loss to warn at
  bool reported_ = false;        // a collapse was returned once
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_COLLAPSE_H_
