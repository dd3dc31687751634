// StepExchange: a worker's messages to the servers, step by step. It owns each step's pulls and
// pushes, asks the mode's PullPolicy for the version to pull next and whether training is done; the
// trainer keeps the set-up and the loop.
//
// A step's route: AwaitValues() waits for the pulled parameters and loads them into every tower;
// the towers run; as each variable's average is ready, a tower thread calls Offer(), which holds
// a small one in the bucket (set_bucket_bytes) or calls Push(), which checks it (Divergence) and
// sends it with the next step's pull of that variable in one request
// (ps::Client::PushThenPull); the bucket's gradients go together, the last of them with the
// tables' push (PushTables) or at FlushBucket; after the step PullNext() pulls the variables
// whose pull did not go with a push, in forward-layer order, and AwaitPushes() collects the
// pushes' staleness.
//
// Versions: the mode's PullPolicy (worker/train/pull_policy.h) says which one to pull next and
// when training is done: sync pulls the step after the one pushed, so versions count steps;
// async, SSP and softsync pull the latest values and each worker runs its own iterations.
//
// Embedding tables (worker/train/table_exchange.h) follow the same versions: each step's batch's
// rows are pulled with the step's parameters, and after the step (PushTables) their gradients go
// with the pull of the next batch's rows, whose ids the trainer made unique ahead
// (TableExchange::Prepare) while the step before was being exchanged.
//
// Contract: Offer() and Push() are called from tower threads, for different variables at once,
// during a step; every other method from the training thread between steps. The state both
// touch is guarded by one mutex, the bucket by another, always taken first (both checked by
// clang's thread-safety analysis); requests are sent and futures waited on outside the first. Every
// wait is bounded by the client's RPC deadline, and a set `stop` ends it with kCancelled. Borrows
// the client and the divergence record, which must outlive it.
#ifndef TOWERPS_WORKER_TRAIN_STEP_EXCHANGE_H_
#define TOWERPS_WORKER_TRAIN_STEP_EXCHANGE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "common/mutex.h"
#include "common/tensor.h"
#include "job/job_config.h"
#include "ps/client/client.h"
#include "towerps/result.h"
#include "worker/data/batcher.h"
#include "worker/tower_group.h"
#include "worker/train/divergence.h"
#include "worker/train/pull_policy.h"
#include "worker/train/step_profile.h"
#include "worker/train/table_exchange.h"

namespace towerps::worker {

class StepExchange {
 public:
  // A model's variables and tables.
  StepExchange(ps::Client& client, const ps::JobConfig& job, const Model<float>& model,
               Divergence& divergence, const std::atomic<bool>* stop);
  // `num_variables` dense variables and fed tables `table_variables` (TableExchange::Feed): a
  // model TowerPS does not build (a PyTorch worker's, python/session.h), whose values go where a
  // ValueSink puts them.
  StepExchange(ps::Client& client, const ps::JobConfig& job, int num_variables,
               std::vector<uint32_t> table_variables, Divergence& divergence,
               const std::atomic<bool>* stop);
  StepExchange(const StepExchange&) = delete;
  StepExchange& operator=(const StepExchange&) = delete;

  // Starts training at `version` (sync: the step; `exact`: at exactly that version, see
  // JoinSyncJob) and iteration `iter`, to `last_step`: pulls every variable, and the tables' rows
  // of `batch`, the first one. Without exactness a sync worker's first pushes replace its own
  // earlier ones still pending on the servers.
  void Begin(int64_t version, int64_t iter, int64_t last_step, bool exact, const Batch& batch)
      EXCLUDES(mu_, bucket_mu_);
  // Whether no pull is outstanding because the worker has run its last iteration (not sync).
  bool RanLastIteration(int64_t iter) const EXCLUDES(mu_);
  // Waits for the outstanding pulls and loads the values into every tower.
  Status AwaitValues(TowerGroup& towers) EXCLUDES(mu_);
  // After PullNext (training thread, the towers idle): loads into every tower the values whose
  // pulls are answered already, without waiting, while the rest of the step's exchange is in
  // flight: a variable whose gradient went alone during backward is answered before the bucket
  // and the first layers' are, and its copy then leaves the step's critical path. A reply that
  // brought an error is kept for AwaitValues to report, as before.
  void LoadArrived(TowerGroup& towers) EXCLUDES(mu_);
  // Where a pulled variable's values go: called once per variable, on the calling thread.
  using ValueSink = std::function<void(int v, const ps::PulledVariable& values)>;
  // The same for an exchange without tables: each variable handed to `sink`.
  Status AwaitValues(const ValueSink& sink) EXCLUDES(mu_);
  // Where training stands after AwaitValues: sync the servers' lowest version, else `iter`.
  int64_t Progress(int64_t iter) const EXCLUDES(mu_);
  bool Done(int64_t iter) const { return Progress(iter) >= last_step(); }

  // Tower threads: variable v's averaged gradient of iteration `iter`, sent without a copy (the
  // towers leave it untouched until AwaitPushes has returned). Not sent when it is not finite
  // and the worker stops on that.
  void Push(int v, const Tensor& average, int64_t iter) EXCLUDES(mu_);
  // Gradients smaller than `bytes` (0, the default: none) wait for each other, in the order they
  // come, as DistributedDataParallel buckets its all-reduces: the held ones go together, one
  // message per server, once they reach `bytes`, and the rest at FlushBucket, which the tables'
  // push takes along (PushTables). Many small variables then cost a step one message per server,
  // not one each; a larger gradient goes alone at once, overlapping the rest of backward. Set
  // before Begin().
  void set_bucket_bytes(int64_t bytes) { bucket_bytes_ = bytes; }
  // The caller may still write a gradient after handing it over (a PyTorch script's p.grad,
  // lent to the push): its finiteness is then not vouched for, and the servers read it for a
  // NaN or an infinity themselves (ps::PushRequest::FiniteCheck). Set before Begin().
  void set_shared_gradients(bool shared) { shared_gradients_ = shared; }
  // Tower threads: Push() through the bucket.
  void Offer(int v, const Tensor& average, int64_t iter) EXCLUDES(mu_, bucket_mu_);
  // The held gradients go now, together (inside a caller's Client::Together, with its requests).
  void FlushBucket() EXCLUDES(mu_, bucket_mu_);

  // A fed table's rows (TableExchange::Feed), handed to `sink` when they come; the step's
  // tables then push from the lowest version any of its rows came at (as AwaitValues's).
  Status AwaitTableRows(int t, const TableExchange::RowSink& sink) EXCLUDES(mu_);
  // After the step of iteration `iter` (training thread): the tables' gradients pushed, and
  // with them, when `ahead`, the pull of the next step's ids given ahead (tables().Prepare of
  // its batch, or a fed table's FeedNext). The bucket's held gradients go with them, one
  // message per server.
  void PushTables(const TableExchange::GradientSource& gradients, int64_t iter, bool ahead)
      EXCLUDES(mu_, bucket_mu_);
  // After a step that ended iteration `iter` - 1: the pulls that did not ride on a push.
  void PullNext(int64_t iter) EXCLUDES(mu_);
  // Waits for this step's pushes; their mean staleness. A non-finite gradient the servers
  // refused (--on-nonfinite continue) counts as dropped.
  Result<double> AwaitPushes() EXCLUDES(mu_);
  // Lets every push in flight finish (they share the towers' gradients), ignoring errors:
  // before a rejoin runs the towers again.
  void DrainPushes() EXCLUDES(mu_);

  // The chief, after training: every variable at `version` or later, loaded into the towers;
  // the lowest and highest chunk versions seen.
  Status PullFinal(TowerGroup& towers, int64_t version, int64_t* min_version, int64_t* max_version)
      EXCLUDES(mu_);
  Status PullFinal(const ValueSink& sink, int64_t version, int64_t* min_version,
                   int64_t* max_version) EXCLUDES(mu_);

  int64_t last_step() const EXCLUDES(mu_);
  // Where the pushes' and pulls' times go (--profile-steps): borrowed, may be null; set before
  // Begin().
  void set_profile(StepProfile* profile) {
    profile_ = profile;
    tables_.set_profile(profile);
  }
  // The tables' part (the chief evaluates and exports through it); empty without tables.
  TableExchange& tables() { return tables_; }
  const TableExchange& tables() const { return tables_; }

 private:
  StepExchange(ps::Client& client, const ps::JobConfig& job, int num_variables,
               TableExchange tables, Divergence& divergence, const std::atomic<bool>* stop);

  using PushFuture = Future<Result<ps::PushReport>>;
  using PullFuture = Future<Result<ps::PulledVariable>>;

  void PullAt(int v, int64_t min_version, int64_t clock, bool exact) REQUIRES(mu_);
  void SendBucketLocked() REQUIRES(bucket_mu_) EXCLUDES(mu_);
  // A pull's reply that LoadArrived took: its values loaded already (status ok), or its error.
  struct Arrived {
    Status status;
    int64_t version = 0, max_version = 0;
  };
  // Variable v's reply: handed to `sink` (and marked in the profile) when it brought values.
  Arrived Take(int v, Result<ps::PulledVariable> reply, const ValueSink& sink);
  // Waits for `pulls` (but those `arrived` already: they are loaded), hands them to `sink` and
  // records their versions.
  Status Load(std::vector<PullFuture> pulls, std::vector<std::optional<Arrived>> arrived,
              const ValueSink& sink, int64_t* max_version) EXCLUDES(mu_);
  // Rows of the step's tables came at `version`.
  void RowsCameAt(int64_t version) REQUIRES(mu_);
  // Loads a pulled variable into every tower.
  static ValueSink IntoTowers(TowerGroup& towers);
  template <typename Reply>
  Reply Await(Future<Reply>& reply) const;

  ps::Client& client_;
  const PullPolicy& policy_;
  const int num_variables_;  // dense
  TableExchange tables_;     // training thread only
  Divergence& divergence_;
  const std::atomic<bool>* const stop_;
  StepProfile* profile_ = nullptr;

  mutable Mutex mu_;
  int64_t last_step_ GUARDED_BY(mu_) = 0;
  bool replace_pending_ GUARDED_BY(mu_) = false;   // this step's pushes replace pending ones
  std::vector<int64_t> versions_ GUARDED_BY(mu_);  // per variable: the version last pulled
  std::vector<PushFuture> pushes_ GUARDED_BY(mu_);
  std::vector<PullFuture> pulls_ GUARDED_BY(mu_);
  std::vector<std::optional<Arrived>> arrived_ GUARDED_BY(mu_);  // per variable, LoadArrived's
  // Per variable: this step's push carried the next pull.
  std::vector<char> pulled_with_push_ GUARDED_BY(mu_);
  // The version the step's tables push from: the lowest of their rows', once some came this
  // step (table_rows_came_); the version asked for until then.
  int64_t table_version_ GUARDED_BY(mu_) = 0;
  bool table_rows_came_ GUARDED_BY(mu_) = false;

  struct Held {
    int v = 0;
    Tensor gradient;
    int64_t iter = 0;
  };
  int64_t bucket_bytes_ = 0;
  Mutex bucket_mu_;  // also keeps one bucket at a time in Client::Together
  std::vector<Held> bucket_ GUARDED_BY(bucket_mu_);
  int64_t bucket_held_bytes_ GUARDED_BY(bucket_mu_) = 0;
  bool shared_gradients_ = false;  // set_shared_gradients
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_STEP_EXCHANGE_H_
