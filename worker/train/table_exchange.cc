#include "worker/train/table_exchange.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "worker/train/join_job.h"

namespace towerps::worker {

TableExchange::TableExchange(ps::Client& client, const Model<float>& model,
                             const std::atomic<bool>* stop)
    : client_(client), stop_(stop) {
  for (int t = 0; t < model.num_tables(); ++t) {
    Table table;
    table.variable = static_cast<uint32_t>(model.table_variable(t));
    table.input = {.field_offset = model.table_field_offset(t),
                   .fields = model.table(t).fields,
                   .bag = model.table_bag(t)};
    tables_.push_back(std::move(table));
  }
}

template <typename Reply>
Reply TableExchange::Await(std::future<Reply>& reply) const {
  return AwaitUnlessStopped(reply, stop_);
}

ps::UniqueIds TableExchange::Unique(const Table& t, const Batch& batch) const {
  // The placement is the client's once it registered (before any batch).
  return ps::Deduplicate(TableIds(batch, t.input),
                         static_cast<int>(client_.placement().ChunksOf(t.variable).size()));
}

void TableExchange::Prepare(const Batch& batch) {
  for (Table& t : tables_) {
    t.next = Unique(t, batch);
    if (t.input.bag >= 0) t.next_bags = batch.bags.at(static_cast<size_t>(t.input.bag)).offsets;
  }
}

void TableExchange::Pull(int64_t version, int64_t clock, bool exact) {
  for (Table& t : tables_) {
    t.pull = client_.Pull({.variable_id = t.variable,
                           .ids = t.next.ids,
                           .min_version = version,
                           .clock = clock,
                           .exact = exact});
  }
}

Result<int64_t> TableExchange::AwaitRows(TowerGroup& towers) {
  int64_t lowest = INT64_MAX;
  for (size_t i = 0; i < tables_.size(); ++i) {
    Table& t = tables_[i];
    TOWERPS_ASSIGN_OR_RETURN(t.rows, Await(t.pull));
    t.current = std::move(t.next);
    t.current_bags.swap(t.next_bags);
    lowest = std::min(lowest, t.rows.version);
    towers.SetTableRows(static_cast<int>(i), t.rows.rows.f32(), t.current.size(),
                        t.current.inverse.data(),
                        t.input.bag >= 0 ? t.current_bags.data() : nullptr);
  }
  return lowest;
}

bool TableExchange::Push(TowerGroup& towers, Divergence& divergence, int64_t version, int64_t clock,
                         bool replace, std::optional<std::pair<int64_t, int64_t>> next) {
  bool all_pulled = true;
  for (size_t i = 0; i < tables_.size(); ++i) {
    Table& t = tables_[i];
    const Tensor gradient = towers.TableGradient(static_cast<int>(i));
    if (!divergence.CheckGradient(static_cast<int>(t.variable), gradient)) {
      all_pulled = false;  // withheld: this worker stops on it
      continue;
    }
    const ps::PushRequest push{.variable_id = t.variable,
                               .version = version,
                               .clock = clock,
                               .gradient = gradient,
                               .replace_pending = replace,
                               .ids = t.current.ids,
                               .pulled_updates = t.rows.updates};
    if (!next) {
      t.push = client_.Push(push);
      continue;
    }
    ps::Client::PushAndPull both = client_.PushThenPull(push, {.variable_id = t.variable,
                                                               .ids = t.next.ids,
                                                               .min_version = next->first,
                                                               .clock = next->second});
    t.push = std::move(both.push);
    t.pull = std::move(both.pull);
  }
  return all_pulled;
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
  std::vector<std::future<Result<ps::PulledVariable>>> probes;
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
  std::vector<std::future<Result<ps::PulledVariable>>> pulls;
  for (Table& t : tables_) {
    t.eval_ids = Unique(t, batch);
    if (t.input.bag >= 0) t.eval_bags = batch.bags.at(static_cast<size_t>(t.input.bag)).offsets;
    pulls.push_back(client_.Pull({.variable_id = t.variable, .ids = t.eval_ids.ids}));
  }
  for (size_t i = 0; i < tables_.size(); ++i) {
    Table& t = tables_[i];
    TOWERPS_ASSIGN_OR_RETURN(t.eval_rows, Await(pulls[i]));
    model.SetTableRows(static_cast<int>(i), t.eval_rows.rows.f32(), t.eval_ids.size(),
                       t.eval_ids.inverse.data(), t.input.bag >= 0 ? t.eval_bags.data() : nullptr);
  }
  return Status::Ok();
}

Result<std::vector<ps::TableRows>> TableExchange::ExportRows() {
  std::vector<ps::TableRows> out;
  for (const Table& t : tables_) {
    auto pull = client_.Pull({.variable_id = t.variable, .every_row = true});
    TOWERPS_ASSIGN_OR_RETURN(const ps::PulledVariable all, Await(pull));
    // Partition after partition: sorted here, so that the files do not depend on the servers.
    const int64_t n = all.ids.num_elements();
    const int64_t dim = n > 0 ? all.rows.num_elements() / n : 0;
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return all.ids.u64()[a] < all.ids.u64()[b]; });
    ps::TableRows rows{.ids = Tensor::Empty({n}, DType::kUInt64),
                       .values = Tensor::Empty({n, dim})};
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
