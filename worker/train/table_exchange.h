// TableExchange: a worker's pulls and pushes of its model's embedding tables, step by step: the
// part of StepExchange (worker/train/step_exchange.h) that moves rows by id.
//
// A step's tables: the ids the step looks up in each table, each once (job/row_batch.h); their
// rows pulled at the version the step's Pull() names and handed to a RowSink with, per lookup,
// the row it uses; after the step, each table's row gradients, from a GradientSource, pushed with
// the pull of the next step's rows riding on the push (Client::PushThenPull) when those ids are
// known: one request per table partition and step. The chief evaluates with rows pulled for each
// test batch (LoadForEvaluation).
//
// Where the ids come from is the seam, as a ValueSink is StepExchange's: a native model's tables
// take them from each batch (Prepare(batch)); a model TowerPS does not build (python/session.h)
// feeds them as its forward looks them up (Feed), and its table's pull goes then, at the version
// Pull() named. The rules - versions, exactness, replacing a rejoined worker's pending push, the
// non-finite check, row staleness - are the same for both, and live here and in StepExchange.
//
// Contract: used by the training thread only, between steps; not thread-safe. Every wait is
// bounded by the client's RPC deadline, and a set `stop` ends it with kCancelled. Borrows the
// client, which must outlive it.
#ifndef TOWERPS_WORKER_TRAIN_TABLE_EXCHANGE_H_
#define TOWERPS_WORKER_TRAIN_TABLE_EXCHANGE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "job/row_batch.h"
#include "ps/client/client.h"
#include "ps/server/checkpoint_reader.h"
#include "towerps/result.h"
#include "worker/data/batcher.h"
#include "worker/model/model.h"
#include "worker/tower_group.h"
#include "worker/train/divergence.h"
#include "worker/train/step_profile.h"

namespace towerps::worker {

class TableExchange {
 public:
  // Where a table's pulled rows go: table t's `rows`, one per id of `ids.ids`, in its order;
  // ids.inverse gives each lookup's row. `bags`: an EmbeddingBag's offsets, or null.
  using RowSink = std::function<void(int t, const ps::PulledVariable& rows,
                                     const ps::UniqueIds& ids, const uint32_t* bags)>;
  // Table t's gradient of the step: `rows` [n, dim]. Without `ids`, one row per id the RowSink
  // got, in their order; with them, n of those ids (each once) and their `updates`
  // (PulledUpdates).
  struct Gradient {
    Tensor rows{};
    Tensor ids{}, updates{};
  };
  using GradientSource = std::function<Gradient(int t)>;

  // A model's tables: each step's ids come from its batch (Prepare(batch)).
  TableExchange(ps::Client& client, const Model<float>& model, const std::atomic<bool>* stop);
  // Tables whose ids the caller feeds (Feed): the variables `variables`, table t the t-th (none:
  // every method does nothing).
  TableExchange(ps::Client& client, std::vector<uint32_t> variables, const std::atomic<bool>* stop);
  TableExchange(TableExchange&&) = default;  // before use: StepExchange's constructors
  TableExchange(const TableExchange&) = delete;
  TableExchange& operator=(const TableExchange&) = delete;

  bool empty() const { return tables_.empty(); }
  // Where the tables' pushes and rows' times go (--profile-steps), each table under its variable's
  // index: borrowed, may be null.
  void set_profile(StepProfile* profile) { profile_ = profile; }
  // The step's table gradients are computed (the towers' backward is done): their profile's
  // gradient event.
  void MarkGradients();

  // A batch the towers run later: its ids for each table that takes them from batches, each
  // once, staged. The next Pull, or Push's `next`, asks for their rows; until then the rows
  // pulled before stay those of the running step and of the one whose pull is in flight, so a
  // trainer may prepare the batch after next while a step's exchange is under way.
  void Prepare(const Batch& batch);
  // Pulls the prepared ids' rows at `version` (exactly it, when `exact`) for iteration `clock`. A
  // fed table's pull goes when its ids are fed, at this version.
  void Pull(int64_t version, int64_t clock, bool exact);
  // A fed table's lookup in the step Pull() named: `ids` (any order, repeats allowed) join the
  // ids table t looked up since, and the rows of them all are pulled. Returns the position of
  // ids[0] in the UniqueIds' inverse that AwaitRows(t, ...) hands on. Ids that FeedNext gave
  // ahead, the next of them in order, are pulled already: nothing is sent for them.
  size_t Feed(int t, std::span<const uint64_t> ids);
  // A fed table's lookups of the next step, known ahead (a loader that looks one batch ahead;
  // each call one lookup, in the order they will come): the step's Push carries their pull, at
  // the next step's version, and the next step's Feeds of the same ids, in the same order, take
  // those rows. Other ids there are pulled as usual.
  void FeedNext(int t, std::span<const uint64_t> ids);
  // Forgets FeedNext's ids and their pulls (a failover: the lookups to come pull again, and
  // mid-step, a Feed of the ids looked up so far pulls them again too).
  void DropAhead();
  // Feeds that took rows pulled ahead, so far.
  int64_t fed_ahead() const { return fed_ahead_; }
  // A lookup that is not the step's (an evaluation's: no gradient will be pushed for it): `ids`'
  // rows at the version Pull() named, pulled without joining table t's ids of the step, so that
  // many such lookups cost each its own rows. `*unique` gets the ids, each once.
  Future<Result<ps::PulledVariable>> PullAside(int t, std::span<const uint64_t> ids,
                                               ps::UniqueIds* unique);
  // Waits for a PullAside (kCancelled when stopped).
  Result<ps::PulledVariable> AwaitAside(Future<Result<ps::PulledVariable>>& pull) const;
  // Waits for the rows pulled for the prepared (or fed) ids and hands them to `sink`: every
  // table's whose pull went, or table t's. Returns the lowest version they are at (the version
  // the step computes from); INT64_MAX when no pull went.
  Result<int64_t> AwaitRows(const RowSink& sink);
  Result<int64_t> AwaitRows(int t, const RowSink& sink);
  // The same, into the towers.
  Result<int64_t> AwaitRows(TowerGroup& towers);
  // The update counts of table t's rows `ids`, as pulled this step, for a Gradient with ids;
  // kInvalidArgument naming an id the step did not pull.
  Result<Tensor> PulledUpdates(int t, std::span<const uint64_t> ids) const;
  // After a step on the rows AwaitRows gave: each table's gradient, computed from `version` at
  // iteration `clock`, pushed (unless Divergence withholds it); with `next` (version, clock),
  // carrying the pull of the ids prepared (or fed ahead) since, which AwaitRows then waits for; a
  // withheld push's table keeps its ids prepared, and Pull() sends their pull.
  void Push(const GradientSource& gradients, Divergence& divergence, int64_t version, int64_t clock,
            bool replace, std::optional<std::pair<int64_t, int64_t>> next);
  // The towers' table gradients.
  static GradientSource FromTowers(TowerGroup& towers);
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
  // Every table's rows as the servers hold them once each partition is at `min_version` or
  // later, for --final-params-out, --export-npz and a PyTorch model's state: one entry per
  // table, ids increasing.
  Result<std::vector<ps::HeldRows>> ExportRows(int64_t min_version = 0);

 private:
  struct Table {
    uint32_t variable = 0;            // the table's variable id
    std::optional<TableInput> input;  // where its ids are in a batch; none: fed
    std::vector<uint64_t> fed;        // a fed table's lookups since Pull()
    std::vector<uint64_t> fed_next;   // FeedNext's, until Pull() makes them the step's
    bool ahead_sent = false;          // fed_next's pull rode on the push
    // The step's fed ids were pulled ahead; Feeds of them, in order, claim them (`claimed`).
    bool ahead = false;
    size_t claimed = 0;
    // The running step's ids, the next one's (their pull sent), and ids prepared or fed
    // ahead whose pull has not gone yet (`prepared`).
    ps::UniqueIds current, next, staged;
    bool prepared = false;
    std::vector<uint32_t> current_bags, next_bags, staged_bags, eval_bags;  // EmbeddingBags'

    ps::PulledVariable rows;                  // current's rows
    Future<Result<ps::PulledVariable>> pull;  // next's
    Future<Result<ps::PushReport>> push;
    ps::UniqueIds eval_ids;
    ps::PulledVariable eval_rows;
  };
  // What Pull() asked for, for fed tables' pulls.
  struct Ask {
    int64_t version = 0, clock = 0;
    bool exact = false;
  };
  // Table t's ids in `batch`, each once.
  ps::UniqueIds Unique(const Table& t, std::span<const uint64_t> ids) const;
  // Push()'s sends, inside one Client::Together.
  void PushEach(const GradientSource& gradients, Divergence& divergence, int64_t version,
                int64_t clock, bool replace, std::optional<std::pair<int64_t, int64_t>> next);
  // t's staged ids become the next step's, their pull going now.
  void TakeStaged(Table& t);
  // Sends the pull of t's prepared ids at `ask_`.
  void SendPull(Table& t);
  // Waits for t's pull and hands its rows to `sink`; their version.
  Result<int64_t> Receive(int index, const RowSink& sink);
  template <typename Reply>
  Reply Await(Future<Reply>& reply) const;

  ps::Client& client_;
  const std::atomic<bool>* const stop_;
  std::vector<Table> tables_;
  Ask ask_;
  int64_t fed_ahead_ = 0;
  StepProfile* profile_ = nullptr;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_TABLE_EXCHANGE_H_
