// Trainer: the distributed training loop of one towerps-worker.
//
// Start-up: connect to every server, register the model (configuration and model are checked
// there), and, on the chief (rank 0) of a fresh job, send the initial values; other workers'
// first pulls wait for them. A job restored from a checkpoint continues from its version.
//
// Each step:
//   1. wait for the parameters pulled for this step and copy them into every tower's model;
//   2. run forward and backward on each tower (threads), each on its slice of the batch;
//   3. as backward finishes a variable on the last tower, average the towers' gradients for it
//      and push them at once, overlapping the rest of backward;
//   4. issue the pulls for the next step, in forward-layer order.
//
// Stopping: sync jobs run until the servers' version reaches epochs * steps_per_epoch (so a
// backup worker whose gradients were dropped never waits for a step that will not come); async
// and SSP workers each run epochs * steps_per_epoch iterations. The chief then pulls the final
// parameters, evaluates them and writes the summary.
//
// Joining: a worker starts where the servers say the job stands, so a restarted one (the
// launcher restarts a worker killed by a signal) carries on from its predecessor: in sync, the
// lowest chunk version, recomputed bit for bit from exactly that version (JoinSyncJob); in
// async and SSP, its own clock, the iterations of it every chunk has applied (JoinAsyncJob).
// When a server restarts under a running worker (from its checkpoint), the client fails what
// was outstanding there; Run() then registers again and rejoins the same way, at the restored
// version, instead of failing.
//
// Non-finite values: each averaged gradient is checked before it is pushed, and the loss after
// each step. With OnNonFinite::kFail (the default) the first NaN or infinity ends training: that
// gradient is not pushed, and Run() returns at once a summary with diverged set (the caller
// reports it and fails). With kContinue training goes on; gradients the servers refuse as
// non-finite count as dropped, and the summary records the divergence.
//
// Contract: Run() once; returns the summary or the first error (a server that does not answer
// within the RPC deadline is named). `stop` (borrowed, may be null) ends training early with
// kCancelled. Not thread-safe.
#ifndef TOWERPS_WORKER_TRAIN_TRAINER_H_
#define TOWERPS_WORKER_TRAIN_TRAINER_H_

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "common/transport.h"
#include "job/job_config.h"
#include "towerps/registry.h"
#include "towerps/result.h"
#include "worker/train/summary.h"
#include "worker/worker_options.h"

namespace towerps::worker {

struct TrainerOptions {
  int rank = 0;
  std::vector<std::string> ps_endpoints;
  ps::JobConfig job;
  WorkerOptions worker;
  const std::atomic<bool>* stop = nullptr;
  // Where --model and --dataset are looked up; borrowed, must outlive the Trainer. Null: the
  // stock registry (the zoo and the stock datasets).
  const Registry* registry = nullptr;
  TransportSecurity security;  // how to prove membership of the job to its servers
  TransportPath transport_path = TransportPath::kAuto;  // --transport
};

class Trainer {
 public:
  static Result<std::unique_ptr<Trainer>> Create(TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  Result<TrainingSummary> Run();

 private:
  class Impl;
  explicit Trainer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_TRAINER_H_
