// TableLookups: a Session's embedding tables (python/session.h), each looked up and pushed
// through the native worker's TableExchange (worker/train/table_exchange.h), whose rules -
// versions, exactness, replacing a pending push, the non-finite check, row staleness - are the
// only ones: nothing is re-derived here.
//
// A step's lookups: Lookup() feeds each table's ids to the exchange (every table's pull goes at
// once), then waits for them in turn and gives, per lookup, the step's distinct ids of that table
// and their rows - a small [u, dim] block, never the whole table - and where each looked-up id's
// row is in it. The script computes from the block and gives back its gradient: AddRows sums the
// blocks of a table looked up more than once. An nn.Embedding(sparse=True) that keeps a local
// weight instead pulls a row per id (PullRows) and pushes its coalesced gradient once
// (PushRows). PushAll hands every table's gradient of the step to the exchange (no rows for a
// table that had none: every partition counts every worker's push); it is kept until Release, so
// that a failover's rejoin can send it again.
//
// Contract: used by the session's thread only, between its AwaitValues and EndStep; not
// thread-safe. Borrows the client and the exchange (Attach), which must outlive it. A wait that
// fails under a server restart is retried through `recover`, which registers again first.
#ifndef TOWERPS_PYTHON_TABLE_LOOKUPS_H_
#define TOWERPS_PYTHON_TABLE_LOOKUPS_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "job/variable.h"
#include "ps/client/client.h"
#include "ps/server/checkpoint_reader.h"
#include "towerps/result.h"
#include "worker/train/step_exchange.h"

namespace towerps::python {

// A row-sparse table: `rows` ids (0: unbounded, any uint64, e.g. a hash) of `dim` floats, which
// the servers create from (--seed, name, id), uniform in [-init_scale, init_scale)
// (job/initial_rows.h), and update by row (--table-optimizer).
struct TableSpec {
  std::string name;
  int64_t rows = 0;
  int64_t dim = 0;
  float init_scale = 0.05f;
  std::string policy;  // its declared admission and eviction (ps::VariableSpec::policy)
  // The bounded tables it joins, in order (ps::VariableSpec::segments); none: its own.
  std::vector<ps::TableSegment> segments{};
};

class TableLookups {
 public:
  // Runs `again` after `failed` once the session has registered again, if a server restarted
  // (a failover); `how` says what it does, for the log. Returns the last status.
  using Recover = std::function<Status(Status failed, const std::function<Status()>& again,
                                       const std::string& how)>;
  // One lookup's rows: the step's distinct ids of its table so far (uint64 [u]), their rows
  // (float32 [u, dim]), and per looked-up id the index of its row.
  struct Rows {
    Tensor ids{}, rows{};
    std::vector<int64_t> inverse;
  };
  // One table's ids for Lookup (any order, repeats allowed).
  struct Ids {
    int table = 0;
    std::span<const uint64_t> ids;
  };

  // Tables whose variables are `first_variable`, `first_variable` + 1, ...
  TableLookups(std::vector<TableSpec> tables, uint32_t first_variable);
  void Attach(ps::Client& client, worker::StepExchange& exchange, Recover recover);

  int size() const { return static_cast<int>(tables_.size()); }
  bool empty() const { return tables_.empty(); }
  std::vector<uint32_t> Variables() const;
  // The tables' variables as registered, after the parameters'.
  void AddVariables(std::vector<ps::VariableSpec>* variables) const;
  // "table 'name'" each, for Divergence's messages.
  void AddNames(std::vector<std::string>* names) const;

  // Every lookup's rows at the step's version, into (*out)[k] for lookups[k]: all the pulls go
  // before the first wait. kInvalidArgument naming the table for a bad index or an id beyond a
  // bounded table's rows; a lookup after the table's PushRows this step is refused.
  // `step`: the lookup is the step's, its ids joining those the step's push covers (a second
  // lookup of a table pulls the rows of both). Otherwise (an evaluation's, no gradient to push)
  // it pulls its own ids alone, so that a loop of them costs each its own rows.
  Status Lookup(std::span<const Ids> lookups, std::vector<Rows>* out, bool step = true);
  // Table t's row for each of `n` ids into rows[n * dim] (a Lookup of one, scattered).
  Status PullRows(int t, const uint64_t* ids, int64_t n, float* rows, bool step = true);
  // Table t's gradient rows of the step for `n` distinct ids, each looked up this step
  // (gradient row i for ids[i]), added to any the step already has for the table (a table
  // looked up twice gives two blocks). kInvalidArgument naming the table and an id the step did
  // not look up, or a table PushRows pushed.
  Status AddRows(int t, const uint64_t* ids, const float* gradients, int64_t n);
  // The same, as the table's one push of the step (a second is refused: it would count a
  // gradient that accumulated over two backward passes twice).
  Status PushRows(int t, const uint64_t* ids, const float* gradients, int64_t n);
  // EndStep's: every table's gradient of step `step` handed to the exchange; again after a
  // rejoin, the same one. `ahead`: the next step's lookups, known ahead (a pipelined loader's),
  // whose pulls ride on the pushes and which the next step's Lookups of the same ids take.
  // kInvalidArgument as Lookup's for a bad table or id, before anything is sent.
  Status PushAll(int64_t step, std::span<const Ids> ahead = {});
  // The step's values are in: its gradients are let go.
  void Release();
  // Every row the servers hold once each partition reaches `min_version` (the job's final
  // version: every worker's last update in), per table, ids increasing.
  Result<std::vector<ps::HeldRows>> Export(int64_t min_version);

 private:
  struct Table {
    TableSpec spec;
    uint32_t variable = 0;
    std::vector<worker::TableExchange::Gradient> added;  // this step's blocks, until PushAll
    bool pushed_once = false;                            // PushRows gave the step's gradient
    worker::TableExchange::Gradient gradient{};  // PushAll's (rows undefined: not yet), held
  };
  Result<Table*> At(int t);
  // Lookup's checks: the tables, their state this step (`step`), bounded tables' ids.
  Status Check(std::span<const Ids> lookups, bool step = true);
  Status LookupForStep(std::span<const Ids> lookups, std::vector<Rows>* out);
  Status LookupAside(std::span<const Ids> lookups, std::vector<Rows>* out);
  // Table t's gradient rows as the exchange takes them (with their ids and update counts).
  Result<worker::TableExchange::Gradient> Stage(const Table& table, int t, const uint64_t* ids,
                                                const float* gradients, int64_t n);
  // The step's blocks of a table as one gradient, the rows of an id in several summed.
  worker::TableExchange::Gradient Merge(int t, Table& table);

  std::vector<Table> tables_;
  ps::Client* client_ = nullptr;
  worker::StepExchange* exchange_ = nullptr;
  Recover recover_;
};

}  // namespace towerps::python

#endif  // TOWERPS_PYTHON_TABLE_LOOKUPS_H_
