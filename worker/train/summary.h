// TrainingSummary: what a worker reports at the end of training, and the --summary-out JSON.
// The chief's summary adds the servers' statistics: updates applied, gradients dropped as stale
// or refused as non-finite, and the staleness histogram with its mean and 99th percentile.
// "diverged" is true once a loss or gradient was NaN or infinite, on this worker or (chief)
// on any worker whose gradient the servers refused.
//
// Contract: plain values and free functions; thread-compatible.
#ifndef TOWERPS_WORKER_TRAIN_SUMMARY_H_
#define TOWERPS_WORKER_TRAIN_SUMMARY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "job/job_config.h"
#include "ps/client/client.h"
#include "worker/train/step_profile.h"

namespace towerps::worker {

struct TrainingSummary {
  double test_accuracy = -1;  // chief only; -1 elsewhere
  double test_loss = 0;
  double test_auc = -1;   // chief, binary models only (then test_loss is the log loss); else -1
  double test_rmse = -1;  // chief, regression models only (test_loss is its square); else -1
  // Chief, binary models only: the standard deviation of the test probabilities; else -1.
  double test_output_std = -1;
  // Chief, models with classes: whether the model ever left chance (worker/train/collapse.h);
  // false is a model that did not learn (no divergence). None: regression, or not measured.
  std::optional<bool> left_chance;
  double final_train_loss = 0;
  // Measures of the caller's own, by name (a PyTorch script's finish(**measures)): the JSON's
  // "measures" object, when there are any.
  std::vector<std::pair<std::string, double>> measures;
  double train_seconds = 0;
  double examples_per_sec = 0;  // all workers together (chief) or this worker
  int64_t steps = 0;            // sync: global steps; async/ssp: this worker's iterations
  // Chief: the lowest and highest chunk version of the final parameters (sync: steps; async
  // and SSP: every worker's iterations, each applied once per chunk).
  int64_t final_version_min = 0, final_version_max = 0;
  // Epochs that ran: steps / steps per epoch, so 0.005 when --max-steps 5 stopped a job of 937
  // steps per epoch, and 2 for a 2-epoch job resumed after its first epoch. Negative: unknown
  // (a PyTorch script's, without a DistributedSampler or finish(epochs=...)); null in the JSON.
  double epochs = 0;
  uint64_t dropped_stale = 0;  // summed over servers (chief)
  double mean_staleness = 0;   // over every update applied (chief); exact
  double p99_staleness = 0;    // from the histogram: its last bucket stands for that and more
  uint64_t staleness_sum = 0;  // summed over servers (chief)
  uint64_t max_staleness = 0;
  uint64_t updates_applied = 0;
  // Gradients the servers read for a NaN or an infinity because their sender had not said they
  // were finite (Header.finite), summed (chief): 0 when every worker checked its own.
  uint64_t server_finite_checks = 0;
  double server_update_seconds = 0;  // the servers' time in optimizer updates, summed (chief)
  // The same in wall-clock time: per server, while any of its threads was updating; summed over
  // servers (chief). It falls as --server-threads share the updates; the sum above does not.
  double server_update_wall_seconds = 0;
  // The longest any server has been training (since its first update): a restarted chief's
  // measure of the job's time, its own covering only itself. Not in the JSON.
  double server_training_seconds = 0;
  std::vector<uint64_t> staleness_histogram;  // bucket i: updates of staleness i (chief)
  // Embedding tables (chief; in the JSON only when the job has some): the rows the servers
  // hold, and row staleness, each applied row's updates between its pull and its push.
  uint64_t table_rows = 0;
  // The tables' policies (ps/server/row_policy.h), over the servers: ids admitted after
  // waiting, ids pending admission, gradients dropped (an id not admitted, once per update),
  // rows evicted by TTL and by capacity.
  uint64_t table_rows_admitted = 0, table_ids_pending = 0, table_gradients_dropped = 0;
  uint64_t table_evicted_ttl = 0, table_evicted_capacity = 0;
  uint64_t table_rows_on_disk = 0, table_row_reads = 0, table_disk_reads = 0;
  uint64_t table_disk_hits = 0, table_disk_writes = 0;
  std::vector<ps::TableStats> tables;  // each table's part of those, over the servers
  std::vector<uint64_t> row_staleness_histogram;
  double mean_row_staleness = 0;
  double p99_row_staleness = 0;
  double wait_seconds = 0;  // this worker: waiting for parameters (the sync barrier)
  // this worker: forward and backward on its towers (pushes go out as gradients appear)
  double compute_seconds = 0;
  double injected_delay_seconds = 0;  // this worker: --straggler/--slow-workers delays
  bool diverged = false;
  // "nonfinite" (a NaN or an infinity) or "collapse" (worker/train/collapse.h); "" when not.
  std::string divergence_kind;
  // The first divergence's step and worker: this worker's own; at the chief, another worker's
  // when the servers refused a non-finite gradient of an earlier step from it. -1: none.
  int64_t diverged_at_step = -1;
  int diverged_worker = -1;
  std::string divergence;           // what was non-finite then, e.g. "loss = nan"
  uint64_t nonfinite_dropped = 0;   // this worker: pushes the servers refused as non-finite
  uint64_t nonfinite_rejected = 0;  // summed over servers (chief): non-finite gradients refused
  ps::FirstNonFinite servers_first_nonfinite;  // the earliest of them, over servers (chief)
  std::optional<ProfileReport> profile;        // --profile-steps
};

// Adds one server's counters and histogram to the summary (the chief calls it per server).
void AddServerStats(const ps::ServerStatsReport& stats, TrainingSummary* summary);
// When the servers refused a non-finite gradient of an earlier step than this worker's own
// divergence (or it has none), records that one as the job's first divergence: its worker and
// step. The chief calls it once every server's stats are in.
void AdoptFirstDivergence(TrainingSummary* summary);
// Sets mean_staleness and p99_staleness from the histogram (its last bucket counts that
// staleness or more) and drops the histogram's trailing empty buckets; the same for rows.
void FinishStalenessStats(TrainingSummary* summary);

// What else a summary records of the run that made it: the worker's options that differ from
// their defaults, as arguments, and its transport.
struct RunRecord {
  std::vector<std::string> worker_args;
  std::string transport = "auto";
  // The model's recommended job flags (ModelDef::recommended), which towerps-launch used for
  // the flags the job did not give; the "job" object has the values that ran.
  std::map<std::string, std::string> model_recommends{};
};

// The summary's examples_per_sec: all workers' examples per second, from one worker's `steps`
// over `seconds` (sync: the job's steps since the worker joined; else its own iterations).
double JobExamplesPerSec(const ps::JobConfig& job, int64_t steps, double seconds);

// The summary as one JSON object (the --summary-out format); NaN and infinities are null. Its
// "job" object holds every job option as resolved (JobConfig::Fields(), without the "--"), and
// "lr_per_update" the rate each update applies before the schedule (--lr times LrFactor()).
std::string SummaryJson(const TrainingSummary& s, const ps::JobConfig& job, int rank,
                        const RunRecord& run = {});

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_SUMMARY_H_
