// MetricsLog: where a worker's metrics go. The --metrics-out file, one JSON object per line:
// "train" lines (every --log-every steps: loss, throughput, staleness, time computing, waiting
// and injected) and "eval" lines (the chief's test accuracy after each epoch and at the end),
// which the experiments' tooling (experiments/towerps_experiments) reads. And with --logdir D,
// the same as TensorBoard scalars in D/worker-<rank> (common/event_writer.h): train/loss,
// train/examples_per_sec, train/sec_per_batch, train/wait_seconds (per step, waiting for
// parameters), train/staleness (of this worker's gradients), eval/accuracy and eval/loss, and for a
// binary model eval/auc and eval/logloss; a regression model has eval/loss and eval/rmse, no
// accuracy.
//
// Contract: owned by one training thread. Writing is best effort: a file that cannot be opened
// or written is logged once as a warning and that output stays closed; each line and event is
// flushed as written, so a killed run keeps what it logged.
#ifndef TOWERPS_WORKER_TRAIN_METRICS_LOG_H_
#define TOWERPS_WORKER_TRAIN_METRICS_LOG_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/event_writer.h"
#include "worker/train/local_training.h"

namespace towerps::worker {

class MetricsLog {
 public:
  // Appends to `path` with "{rank}" replaced by the rank, and writes events in
  // `logdir`/worker-<rank>; an empty path or logdir writes nothing there.
  void Open(const std::string& path, const std::string& logdir, int rank);
  void Train(int64_t step, int64_t epoch, double loss, double examples_per_sec, double staleness,
             double step_seconds, double wait_seconds, double delay_seconds);
  // test_accuracy and test_loss; for a binary model also test_auc and test_logloss (the loss);
  // for a regression model test_loss and test_rmse, no accuracy.
  void Eval(int64_t step, int64_t epoch, const EpochStats& eval);
  // A value of the caller's own (a PyTorch script's tps.log_scalar): the TensorBoard scalar
  // `tag`, and a "scalar" line with "tag" and "value".
  void Scalar(int64_t step, int64_t epoch, const std::string& tag, double value);

 private:
  // A line's common fields: kind, wall-clock time, worker, step, epoch.
  nlohmann::ordered_json Line(const char* kind, int64_t step, int64_t epoch) const;
  void Write(const nlohmann::ordered_json& line);
  void WriteEvents(int64_t step, const std::vector<std::pair<std::string, double>>& values);

  std::ofstream out_;
  std::unique_ptr<EventWriter> events_;
  int rank_ = 0;
};

// `path` with every "{rank}" replaced by the rank.
std::string ExpandRank(std::string path, int rank);
// `v` as a JSON number, or null: JSON has no NaN or infinity, and a diverged run has them.
nlohmann::json JsonNumber(double v);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_METRICS_LOG_H_
