// The chief's end of training (worker rank 0): once every worker's last update is in, the final
// parameters are pulled and evaluated, the servers' statistics gathered into the summary,
// --final-params-out and --export-npz written, and the servers asked to stop.
//
// Contract: a free function on the trainer's parts, all borrowed for the call; blocks on the
// servers (each wait bounded by the client's RPC deadline) and returns the first error.
#ifndef TOWERPS_WORKER_TRAIN_CHIEF_H_
#define TOWERPS_WORKER_TRAIN_CHIEF_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>

#include "job/job_config.h"
#include "ps/client/client.h"
#include "towerps/result.h"
#include "worker/data/batcher.h"
#include "worker/tower_group.h"
#include "worker/train/metrics_log.h"
#include "worker/train/step_exchange.h"
#include "worker/train/summary.h"
#include "worker/worker_options.h"

namespace towerps::worker {

struct ChiefParts {
  ps::Client& client;
  StepExchange& exchange;
  TowerGroup& towers;
  BatchSource& test_batches;
  MetricsLog& metrics;
  const ps::JobConfig& job;
  const WorkerOptions& options;
  int64_t steps_per_epoch;
  const std::atomic<bool>* stop;  // may be null
  // Before each test batch: its embedding tables' rows (null without tables).
  std::function<Status(const Batch&)> prepare_eval;
};

// Adds every server's statistics to the summary (AddServerStats, then FinishStalenessStats).
Status GatherServerStats(ps::Client& client, const std::atomic<bool>* stop,
                         TrainingSummary* summary);

// Every worker's end, after its last request: tells every server this worker is done after
// `last_step` steps, so that a sync step it will never push to fails at once, naming it, rather
// than timing out on a server (ps/server/shard.h), and the chief's shutdown under
// --shutdown-servers waits for it and no longer (ps/server/shutdown_gate.h). Best effort, at most
// kLeaveWait: a server that does not answer (a dead one, restarting) is logged.
inline constexpr std::chrono::milliseconds kLeaveWait{5000};
void LeaveServers(ps::Client& client, const std::atomic<bool>* stop, int64_t last_step);
// The chief's end under --shutdown-servers, once every worker's last update is in: asks every
// server to stop (it waits for the workers still to leave, ps/server/shutdown_gate.h).
Status StopServers(ps::Client& client, const std::atomic<bool>* stop);

// `total`: the iterations each worker trained; `done_steps`: the steps the summary reports.
Status FinishAsChief(const ChiefParts& parts, int64_t total, int64_t done_steps,
                     TrainingSummary* summary);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_CHIEF_H_
