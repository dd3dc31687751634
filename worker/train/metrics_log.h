// MetricsLog: a worker's --metrics-out file, one JSON object per line: "train" lines (every
// --log-every steps: loss, throughput, staleness, time computing, waiting and injected) and
// "eval" lines (the chief's test accuracy after each epoch and at the end). The experiments'
// tooling (experiments/towerps_experiments) reads them.
//
// Contract: owned by one training thread. Writing is best effort: a file that cannot be opened
// is logged once as a warning and the log stays closed; each line is flushed as written, so a
// killed run keeps what it logged.
#ifndef TOWERPS_WORKER_TRAIN_METRICS_LOG_H_
#define TOWERPS_WORKER_TRAIN_METRICS_LOG_H_

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace towerps::worker {

class MetricsLog {
 public:
  // Appends to `path` with "{rank}" replaced by the rank; an empty path logs nothing.
  void Open(const std::string& path, int rank);
  void Train(int64_t step, int64_t epoch, double loss, double examples_per_sec, double staleness,
             double step_seconds, double wait_seconds, double delay_seconds);
  void Eval(int64_t step, int64_t epoch, double test_accuracy, double test_loss);

 private:
  // A line's common fields: kind, wall-clock time, worker, step, epoch.
  nlohmann::ordered_json Line(const char* kind, int64_t step, int64_t epoch) const;
  void Write(const nlohmann::ordered_json& line);

  std::ofstream out_;
  int rank_ = 0;
};

// `path` with every "{rank}" replaced by the rank.
std::string ExpandRank(std::string path, int rank);
// `v` as a JSON number, or null: JSON has no NaN or infinity, and a diverged run has them.
nlohmann::json JsonNumber(double v);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_METRICS_LOG_H_
