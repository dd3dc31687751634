// TableExchange: a worker's pulls and pushes of its model's embedding tables, step by step: the
// part of StepExchange (worker/train/step_exchange.h) that moves rows by id.
//
// A step's tables: the ids the step's batch looks up in each table, each once (job/row_batch.h);
// their rows pulled at the step's version and handed to the towers with, per example and field,
// the row it uses; after the step, each table's row gradients, averaged over the towers, pushed
// with the pull of the next batch's rows riding on the push (Client::PushThenPull): one
// request per table partition and step. The chief evaluates with rows pulled for each test
// batch (LoadForEvaluation).
//
// Contract: used by the training thread only, between steps; not thread-safe. Every wait is
// bounded by the client's RPC deadline, and a set `stop` ends it with kCancelled. Borrows the
// client, which must outlive it.
#ifndef TOWERPS_WORKER_TRAIN_TABLE_EXCHANGE_H_
#define TOWERPS_WORKER_TRAIN_TABLE_EXCHANGE_H_

#include <atomic>
#include <cstdint>
#include <future>
#include <optional>
#include <vector>

#include "job/row_batch.h"
#include "ps/client/client.h"
#include "ps/server/checkpoint_reader.h"
#include "towerps/result.h"
#include "worker/data/batcher.h"
#include "worker/model/model.h"
#include "worker/tower_group.h"
#include "worker/train/divergence.h"

namespace towerps::worker {

class TableExchange {
 public:
  TableExchange(ps::Client& client, const Model<float>& model, const std::atomic<bool>* stop);
  // No tables: every method does nothing.
  TableExchange(ps::Client& client, const std::atomic<bool>* stop) : client_(client), stop_(stop) {}
  TableExchange(TableExchange&&) = default;  // before use: StepExchange's constructors
  TableExchange(const TableExchange&) = delete;
  TableExchange& operator=(const TableExchange&) = delete;

  bool empty() const { return tables_.empty(); }

  // The batch the towers run next: its ids for each table, each once. Pull, and Push's `next`,
  // ask for its rows.
  void Prepare(const Batch& batch);
  // Pulls the prepared batch's rows at `version` (exactly it, when `exact`) for iteration `clock`.
  void Pull(int64_t version, int64_t clock, bool exact);
  // Waits for the rows pulled for the prepared batch and hands them to the towers; returns the
  // lowest version they are at (the version the step computes from).
  Result<int64_t> AwaitRows(TowerGroup& towers);
  // After a step on the rows AwaitRows gave: each table's gradient, computed from `version` at
  // iteration `clock`, pushed (unless Divergence withholds it); with `next` (version, clock),
  // carrying the pull of the batch prepared since, which AwaitRows then waits for. Returns
  // whether the pull went: false when a push was withheld (Pull it then).
  bool Push(TowerGroup& towers, Divergence& divergence, int64_t version, int64_t clock,
            bool replace, std::optional<std::pair<int64_t, int64_t>> next);
  // Waits for the pushes; adds each one's mean staleness to `*staleness_sum` and counts them in
  // `*pushes`. A non-finite gradient the servers refused counts as dropped.
  Status AwaitPushes(Divergence& divergence, double* staleness_sum, int* pushes);
  // Lets the pushes in flight finish, ignoring errors (they share the towers' gradients).
  void DrainPushes();

  // Every partition of every table at `version` or later (exact: exactly): the lowest and
  // highest versions, and this worker's lowest clock, merged into the arguments.
  Status Probe(int64_t version, bool exact, int64_t* lowest, int64_t* highest, int64_t* clock);
  // The chief's evaluation: `batch`'s rows, pulled at the latest version, set into `model`.
  // They stay valid until the next call.
  Status LoadForEvaluation(const Batch& batch, Model<float>& model);
  // Every table's rows as the servers hold them, for --final-params-out and --export-npz: one
  // entry per table, ids increasing.
  Result<std::vector<ps::TableRows>> ExportRows();

 private:
  struct Table {
    uint32_t variable = 0;        // the table's variable id
    TableInput input;             // where its ids are in a batch
    ps::UniqueIds current, next;  // the running batch's ids, and the prepared one's
    std::vector<uint32_t> current_bags, next_bags, eval_bags;  // an EmbeddingBag's offsets
    ps::PulledVariable rows;                                   // current's rows
    std::future<Result<ps::PulledVariable>> pull;              // next's
    std::future<Result<ps::PushReport>> push;
    ps::UniqueIds eval_ids;
    ps::PulledVariable eval_rows;
  };
  // Table t's ids in `batch`, each once.
  ps::UniqueIds Unique(const Table& t, const Batch& batch) const;
  template <typename Reply>
  Reply Await(std::future<Reply>& reply) const;

  ps::Client& client_;
  const std::atomic<bool>* const stop_;
  std::vector<Table> tables_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_TABLE_EXCHANGE_H_
