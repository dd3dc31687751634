// TrainingSummary: what a worker reports at the end of training, and the --summary-out JSON.
// The chief's summary adds the servers' statistics: updates applied, gradients dropped as stale
// and the staleness histogram with its mean and 99th percentile.
//
// Contract: plain values and free functions; thread-compatible.
#ifndef TOWERPS_WORKER_TRAIN_SUMMARY_H_
#define TOWERPS_WORKER_TRAIN_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "ps/client.h"
#include "ps/job_config.h"

namespace towerps::worker {

struct TrainingSummary {
  double test_accuracy = -1;  // chief only; -1 elsewhere
  double test_loss = 0;
  double final_train_loss = 0;
  double train_seconds = 0;
  double examples_per_sec = 0;  // all workers together (chief) or this worker
  int64_t steps = 0;            // sync: global steps; async/ssp: this worker's iterations
  int epochs = 0;
  uint64_t dropped_stale = 0;  // summed over servers (chief)
  double mean_staleness = 0;   // over every update applied (chief)
  double p99_staleness = 0;
  uint64_t updates_applied = 0;
  std::vector<uint64_t> staleness_histogram;  // bucket i: updates of staleness i (chief)
  double wait_seconds = 0;            // this worker: waiting for parameters (the sync barrier)
  double injected_delay_seconds = 0;  // this worker: --straggler/--slow-workers delays
};

// Adds one server's counters and histogram to the summary (the chief calls it per server).
void AddServerStats(const ps::ServerStatsReport& stats, TrainingSummary* summary);
// Sets mean_staleness and p99_staleness from the histogram (its last bucket counts that
// staleness or more) and drops the histogram's trailing empty buckets.
void FinishStalenessStats(TrainingSummary* summary);

// The summary as one JSON object (the --summary-out format); NaN and infinities are null.
std::string SummaryJson(const TrainingSummary& s, const ps::JobConfig& job, int rank);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_SUMMARY_H_
