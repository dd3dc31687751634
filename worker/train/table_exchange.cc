#include "worker/train/table_exchange.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>

#include "worker/train/join_job.h"

namespace towerps::worker {

TableExchange::TableExchange(ps::Client& client, const Model<float>& model,
                             const std::atomic<bool>* stop)
    : client_(client), stop_(stop) {
  for (int t = 0; t < model.num_tables(); ++t) {
    Table table;
    table.variable = static_cast<uint32_t>(model.table_variable(t));
    table.input = TableInput{.field_offset = model.table_field_offset(t),
                             .fields = model.table(t).fields,
                             .bag = model.table_bag(t)};
    tables_.push_back(std::move(table));
  }
}

TableExchange::TableExchange(ps::Client& client, std::vector<uint32_t> variables,
                             const std::atomic<bool>* stop)
    : client_(client), stop_(stop) {
  for (uint32_t v : variables) {
    Table table;
    table.variable = v;
    tables_.push_back(std::move(table));
  }
}

template <typename Reply>
Reply TableExchange::Await(Future<Reply>& reply) const {
  return AwaitUnlessStopped(reply, stop_);
}

ps::UniqueIds TableExchange::Unique(const Table& t, std::span<const uint64_t> ids) const {
  // The placement is the client's once it registered (before any batch).
  return ps::Deduplicate(ids, static_cast<int>(client_.placement().ChunksOf(t.variable).size()));
}

void TableExchange::Prepare(const Batch& batch) {
  for (Table& t : tables_) {
    if (!t.input) continue;
    t.staged = Unique(t, TableIds(batch, *t.input));
    t.prepared = true;
    if (t.input->bag >= 0) {
      t.staged_bags = batch.bags.at(static_cast<size_t>(t.input->bag)).offsets;
    }
  }
}

void TableExchange::TakeStaged(Table& t) {
  t.next = std::move(t.staged);
  t.next_bags = std::move(t.staged_bags);
  t.staged_bags.clear();
  t.prepared = false;
}

void TableExchange::SendPull(Table& t) {
  TakeStaged(t);
  t.pull = client_.Pull({.variable_id = t.variable,
                         .ids = t.next.ids,
                         .min_version = ask_.version,
                         .clock = ask_.clock,
                         .exact = ask_.exact});
}

void TableExchange::Pull(int64_t version, int64_t clock, bool exact) {
  ask_ = {.version = version, .clock = clock, .exact = exact};
  client_.Together([&] {  // every table's pull in one message per server
    for (Table& t : tables_) {
      if (t.prepared) {
        SendPull(t);  // a fed table's: FeedNext's ids, whose push went without it
        t.ahead_sent = !t.input;
      }
      if (t.input) continue;
      // A fed table's step begins: its lookups come with the caller's forward, those known
      // ahead pulled already.
      t.ahead = std::exchange(t.ahead_sent, false);
      t.fed = t.ahead ? std::move(t.fed_next) : std::vector<uint64_t>{};
      t.fed_next.clear();
      t.claimed = 0;
      t.current = {};
      t.rows = {};
    }
  });
}

size_t TableExchange::Feed(int index, std::span<const uint64_t> ids) {
  Table& t = tables_.at(static_cast<size_t>(index));
  if (t.ahead && !ids.empty() && t.claimed + ids.size() <= t.fed.size() &&
      std::equal(ids.begin(), ids.end(), t.fed.begin() + static_cast<ptrdiff_t>(t.claimed))) {
    t.claimed += ids.size();  // its rows are on their way
    ++fed_ahead_;
    return t.claimed - ids.size();
  }
  if (t.ahead) {  // not what was fed ahead: the step's lookups so far, then these
    t.ahead = false;
    t.fed.resize(t.claimed);
  }
  const size_t first = t.fed.size();
  t.fed.insert(t.fed.end(), ids.begin(), ids.end());
  // Every lookup of the step, so that one push covers them all (a table looked up twice).
  t.staged = Unique(t, t.fed);
  SendPull(t);
  return first;
}

void TableExchange::FeedNext(int index, std::span<const uint64_t> ids) {
  Table& t = tables_.at(static_cast<size_t>(index));
  t.fed_next.insert(t.fed_next.end(), ids.begin(), ids.end());
  t.staged = Unique(t, t.fed_next);
  t.prepared = true;
}

void TableExchange::DropAhead() {
  for (Table& t : tables_) {
    if (t.input) continue;
    if (t.ahead_sent || !t.fed_next.empty()) t.prepared = false;
    t.fed_next.clear();
    t.ahead_sent = false;
    if (t.ahead) t.fed.resize(t.claimed);  // mid-step: the lookups so far are pulled again
    t.ahead = false;
  }
}

Future<Result<ps::PulledVariable>> TableExchange::PullAside(int index,
                                                            std::span<const uint64_t> ids,
                                                            ps::UniqueIds* unique) {
  const Table& t = tables_.at(static_cast<size_t>(index));
  *unique = Unique(t, ids);
  return client_.Pull({.variable_id = t.variable,
                       .ids = unique->ids,
                       .min_version = ask_.version,
                       .clock = ask_.clock,
                       .exact = ask_.exact});
}

Result<ps::PulledVariable> TableExchange::AwaitAside(
    Future<Result<ps::PulledVariable>>& pull) const {
  return Await(pull);
}

Result<int64_t> TableExchange::Receive(int index, const RowSink& sink) {
  Table& t = tables_[static_cast<size_t>(index)];
  TOWERPS_ASSIGN_OR_RETURN(t.rows, Await(t.pull));
  t.current = std::move(t.next);
  t.current_bags.swap(t.next_bags);
  const bool bag = t.input && t.input->bag >= 0;
  sink(index, t.rows, t.current, bag ? t.current_bags.data() : nullptr);
  if (profile_ != nullptr) {
    profile_->Mark(static_cast<int>(t.variable), StepProfile::Event::kArrived, t.rows.answered);
    profile_->Mark(static_cast<int>(t.variable), StepProfile::Event::kLoaded);
  }
  return t.rows.version;
}

Result<int64_t> TableExchange::AwaitRows(const RowSink& sink) {
  int64_t lowest = INT64_MAX;
  for (size_t i = 0; i < tables_.size(); ++i) {
    if (!tables_[i].pull.valid()) continue;
    TOWERPS_ASSIGN_OR_RETURN(const int64_t version, Receive(static_cast<int>(i), sink));
    lowest = std::min(lowest, version);
  }
  return lowest;
}

Result<int64_t> TableExchange::AwaitRows(int t, const RowSink& sink) {
  const Table& table = tables_.at(static_cast<size_t>(t));
  if (!table.pull.valid() && table.ahead && table.rows.rows.defined()) {
    // A later lookup of ids pulled ahead, whose rows an earlier one received: the same rows.
    sink(t, table.rows, table.current, nullptr);
    return table.rows.version;
  }
  if (!table.pull.valid()) {
    return FailedPreconditionError("table variable " +
                                   std::to_string(tables_[static_cast<size_t>(t)].variable) +
                                   " has no pull in flight (Feed its ids first)");
  }
  return Receive(t, sink);
}

Result<int64_t> TableExchange::AwaitRows(TowerGroup& towers) {
  return AwaitRows([&towers](int t, const ps::PulledVariable& rows, const ps::UniqueIds& ids,
                             const uint32_t* bags) {
    towers.SetTableRows(t, rows.rows.f32(), ids.size(), ids.inverse.data(), bags);
  });
}

Result<Tensor> TableExchange::PulledUpdates(int index, std::span<const uint64_t> ids) const {
  const Table& t = tables_.at(static_cast<size_t>(index));
  if (t.current.ids.defined() && static_cast<int64_t>(ids.size()) == t.current.size() &&
      std::equal(ids.begin(), ids.end(), t.current.ids.u64())) {
    return t.rows.updates;  // the ids pulled, in their order: their counts as they came
  }
  std::unordered_map<uint64_t, uint32_t> pulled;
  pulled.reserve(static_cast<size_t>(t.current.size()));
  for (int64_t i = 0; i < t.current.size(); ++i) {
    pulled.emplace(t.current.ids.u64()[i], t.rows.updates.u32()[i]);
  }
  Tensor updates = Tensor::Empty({static_cast<int64_t>(ids.size())}, DType::kUInt32);
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto found = pulled.find(ids[i]);
    if (found == pulled.end()) {
      return InvalidArgumentError("row " + std::to_string(ids[i]) +
                                  ", which this step did not pull");
    }
    updates.u32()[i] = found->second;
  }
  return updates;
}

TableExchange::GradientSource TableExchange::FromTowers(TowerGroup& towers) {
  return [&towers](int t) { return Gradient{.rows = towers.TableGradient(t)}; };
}

void TableExchange::Push(const GradientSource& gradients, Divergence& divergence, int64_t version,
                         int64_t clock, bool replace,
                         std::optional<std::pair<int64_t, int64_t>> next) {
  client_.Together([&] {  // every table's push (and next pull) in one message per server
    PushEach(gradients, divergence, version, clock, replace, next);
    if (profile_ == nullptr) return;
    // Marked as the bundle is complete, before the client sends it (as Together ends, or the
    // caller's Together that this one joins), so that no reply can be stamped earlier.
    for (const Table& t : tables_) {
      if (t.push.valid()) profile_->Mark(static_cast<int>(t.variable), StepProfile::Event::kSent);
    }
  });
}

void TableExchange::PushEach(const GradientSource& gradients, Divergence& divergence,
                             int64_t version, int64_t clock, bool replace,
                             std::optional<std::pair<int64_t, int64_t>> next) {
  for (size_t i = 0; i < tables_.size(); ++i) {
    Table& t = tables_[i];
    const Gradient gradient = gradients(static_cast<int>(i));
    if (!divergence.CheckGradient(static_cast<int>(t.variable), gradient.rows)) {
      continue;  // withheld: this worker stops on it (its next ids stay prepared)
    }
    const ps::PushRequest push{
        .variable_id = t.variable,
        .version = version,
        .clock = clock,
        .gradient = gradient.rows,
        .replace_pending = replace,
        .finite_check = divergence.GradientWasNonFinite(static_cast<int>(t.variable))
                            ? ps::PushRequest::FiniteCheck::kServer
                            : ps::PushRequest::FiniteCheck::kCaller,
        .ids = gradient.ids.defined() ? gradient.ids : t.current.ids,
        .pulled_updates = gradient.ids.defined() ? gradient.updates : t.rows.updates};
    if (!next || !t.prepared) {  // no next ids: a fed table without FeedNext
      t.push = client_.Push(push);
      continue;
    }
    TakeStaged(t);
    ps::Client::PushAndPull both = client_.PushThenPull(push, {.variable_id = t.variable,
                                                               .ids = t.next.ids,
                                                               .min_version = next->first,
                                                               .clock = next->second});
    t.push = std::move(both.push);
    t.pull = std::move(both.pull);
    t.ahead_sent = !t.input;
  }
}

void TableExchange::MarkGradients() {
  if (profile_ == nullptr) return;
  for (const Table& t : tables_) {
    profile_->Mark(static_cast<int>(t.variable), StepProfile::Event::kGradient);
  }
}

Status TableExchange::AwaitPushes(Divergence& divergence, double* staleness_sum, int* pushes) {
  for (Table& t : tables_) {
    if (!t.push.valid()) continue;
    Result<ps::PushReport> r = Await(t.push);
    const int v = static_cast<int>(t.variable);
    if (!r.ok() && divergence.GradientWasNonFinite(v) &&
        r.status().code() == StatusCode::kInvalidArgument) {
      divergence.CountRefused();
      continue;
    }
    TOWERPS_RETURN_IF_ERROR(r.status());
    if (profile_ != nullptr) profile_->Mark(v, StepProfile::Event::kAnswered, r->answered);
    *staleness_sum += r->mean_staleness;
    ++*pushes;
  }
  return Status::Ok();
}

void TableExchange::DrainPushes() {
  for (Table& t : tables_) {
    if (t.push.valid()) (void)Await(t.push);
  }
}

Status TableExchange::Probe(int64_t version, bool exact, int64_t* lowest, int64_t* highest,
                            int64_t* clock) {
  std::vector<Future<Result<ps::PulledVariable>>> probes;
  for (const Table& t : tables_) {
    probes.push_back(client_.Pull({.variable_id = t.variable,
                                   .ids = Tensor::Empty({0}, DType::kUInt64),
                                   .min_version = version,
                                   .exact = exact}));
  }
  for (auto& probe : probes) {
    TOWERPS_ASSIGN_OR_RETURN(const ps::PulledVariable p, Await(probe));
    *lowest = std::min(*lowest, p.version);
    *highest = std::max(*highest, p.max_version);
    *clock = *clock < 0 ? p.min_clock : std::min(*clock, p.min_clock);
  }
  return Status::Ok();
}

Status TableExchange::LoadForEvaluation(const Batch& batch, Model<float>& model) {
  std::vector<Future<Result<ps::PulledVariable>>> pulls;
  for (Table& t : tables_) {
    if (!t.input) return FailedPreconditionError("a fed table has no evaluation batches");
    t.eval_ids = Unique(t, TableIds(batch, *t.input));
    if (t.input->bag >= 0) t.eval_bags = batch.bags.at(static_cast<size_t>(t.input->bag)).offsets;
    pulls.push_back(client_.Pull({.variable_id = t.variable, .ids = t.eval_ids.ids}));
  }
  for (size_t i = 0; i < tables_.size(); ++i) {
    Table& t = tables_[i];
    TOWERPS_ASSIGN_OR_RETURN(t.eval_rows, Await(pulls[i]));
    model.SetTableRows(static_cast<int>(i), t.eval_rows.rows.f32(), t.eval_ids.size(),
                       t.eval_ids.inverse.data(), t.input->bag >= 0 ? t.eval_bags.data() : nullptr);
  }
  return Status::Ok();
}

Result<std::vector<ps::HeldRows>> TableExchange::ExportRows(int64_t min_version) {
  std::vector<ps::HeldRows> out;
  for (const Table& t : tables_) {
    auto pull =
        client_.Pull({.variable_id = t.variable, .min_version = min_version, .every_row = true});
    TOWERPS_ASSIGN_OR_RETURN(const ps::PulledVariable all, Await(pull));
    // Partition after partition: sorted here, so that the files do not depend on the servers.
    const int64_t n = all.ids.num_elements();
    const int64_t dim = n > 0 ? all.rows.num_elements() / n : 0;
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return all.ids.u64()[a] < all.ids.u64()[b]; });
    ps::HeldRows rows{.ids = Tensor::Empty({n}, DType::kUInt64), .values = Tensor::Empty({n, dim})};
    for (int64_t i = 0; i < n; ++i) {
      const int64_t r = order[static_cast<size_t>(i)];
      rows.ids.u64()[i] = all.ids.u64()[r];
      std::memcpy(rows.values.f32() + i * dim, all.rows.f32() + r * dim,
                  static_cast<size_t>(dim) * sizeof(float));
    }
    out.push_back(std::move(rows));
  }
  return out;
}

}  // namespace towerps::worker
