#include "python/table_lookups.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>
#include <utility>

namespace towerps::python {

TableLookups::TableLookups(std::vector<TableSpec> tables, uint32_t first_variable) {
  for (TableSpec& spec : tables) {
    Table& t = tables_.emplace_back();
    t.variable = first_variable + static_cast<uint32_t>(tables_.size() - 1);
    t.spec = std::move(spec);
  }
}

void TableLookups::Attach(ps::Client& client, worker::StepExchange& exchange, Recover recover) {
  client_ = &client;
  exchange_ = &exchange;
  recover_ = std::move(recover);
}

std::vector<uint32_t> TableLookups::Variables() const {
  std::vector<uint32_t> ids;
  for (const Table& t : tables_) ids.push_back(t.variable);
  return ids;
}

void TableLookups::AddVariables(std::vector<ps::VariableSpec>* variables) const {
  for (const Table& t : tables_) {
    variables->push_back(
        ps::TableVariable(t.spec.name, t.spec.rows, t.spec.dim, t.spec.init_scale));
    variables->back().policy = t.spec.policy;
    variables->back().segments = t.spec.segments;
  }
}

void TableLookups::AddNames(std::vector<std::string>* names) const {
  for (const Table& t : tables_) names->push_back("table '" + t.spec.name + "'");
}

Result<TableLookups::Table*> TableLookups::At(int t) {
  if (t < 0 || t >= size()) {
    return InvalidArgumentError("no table " + std::to_string(t) + " (the model has " +
                                std::to_string(size()) + ")");
  }
  return &tables_[static_cast<size_t>(t)];
}

Status TableLookups::Check(std::span<const Ids> lookups, bool step) {
  for (const Ids& l : lookups) {
    TOWERPS_ASSIGN_OR_RETURN(const Table* table, At(l.table));
    const TableSpec& spec = table->spec;
    if (step && table->pushed_once) {
      return InvalidArgumentError("table '" + spec.name +
                                  "' was looked up after its push in one step (call step() first)");
    }
    if (spec.rows <= 0) continue;  // unbounded: any id
    for (const uint64_t id : l.ids) {
      if (id >= static_cast<uint64_t>(spec.rows)) {
        return InvalidArgumentError(
            "table '" + spec.name + "' has " + std::to_string(spec.rows) + " rows, and got id " +
            (id >> 63 ? std::to_string(static_cast<int64_t>(id)) : std::to_string(id)) +
            ": give ids in [0, " + std::to_string(spec.rows) +
            "), or make the table unbounded (num_embeddings=None) to take any int64");
      }
    }
  }
  return Status::Ok();
}

namespace {

// A lookup's rows: the distinct ids, their rows, and the lookup's ids' places among them (from
// `first` on in `unique`'s inverse).
void CopyRows(const ps::PulledVariable& got, const ps::UniqueIds& unique, size_t first, size_t n,
              int64_t dim, TableLookups::Rows* rows) {
  rows->ids = Tensor::Empty({unique.size()}, DType::kUInt64);
  rows->rows = Tensor::Empty({unique.size(), dim});
  std::memcpy(rows->ids.u64(), unique.ids.u64(), rows->ids.byte_size());
  std::memcpy(rows->rows.f32(), got.rows.f32(), rows->rows.byte_size());
  rows->inverse.resize(n);
  for (size_t i = 0; i < n; ++i) rows->inverse[i] = unique.inverse[first + i];
}

}  // namespace

Status TableLookups::Lookup(std::span<const Ids> lookups, std::vector<Rows>* out, bool step) {
  TOWERPS_RETURN_IF_ERROR(Check(lookups));
  out->assign(lookups.size(), Rows{});
  return step ? LookupForStep(lookups, out) : LookupAside(lookups, out);
}

Status TableLookups::LookupForStep(std::span<const Ids> lookups, std::vector<Rows>* out) {
  // Every table's pull goes before the first wait.
  std::vector<size_t> first;
  client_->Together([&] {  // one message per server for every table
    for (const Ids& l : lookups) first.push_back(exchange_->tables().Feed(l.table, l.ids));
  });
  for (size_t k = 0; k < lookups.size(); ++k) {
    const int t = lookups[k].table;
    const TableSpec& spec = tables_[static_cast<size_t>(t)].spec;
    const auto await = [&] {
      return exchange_->AwaitTableRows(
          t, [&](int, const ps::PulledVariable& got, const ps::UniqueIds& unique, const uint32_t*) {
            CopyRows(got, unique, first[k], lookups[k].ids.size(), spec.dim, &(*out)[k]);
          });
    };
    // Mid-step, a failover loses only these pulls: the servers still hold this step's version
    // (the step before is complete everywhere, its values here), so the same pulls go again,
    // this one's and those not yet awaited.
    TOWERPS_RETURN_IF_ERROR(recover_(
                                await(),
                                [&] {
                                  // Rows pulled ahead may have died with the server too.
                                  exchange_->tables().DropAhead();
                                  client_->Together([&] {
                                    for (size_t j = k; j < lookups.size(); ++j) {
                                      exchange_->tables().Feed(lookups[j].table, {});
                                    }
                                  });
                                  return await();
                                },
                                "registering again and pulling table '" + spec.name + "' again")
                                .WithContext("table '" + spec.name + "'"));
  }
  return Status::Ok();
}

Status TableLookups::LookupAside(std::span<const Ids> lookups, std::vector<Rows>* out) {
  std::vector<ps::UniqueIds> unique(lookups.size());
  std::vector<Future<Result<ps::PulledVariable>>> pulls(lookups.size());
  const auto send = [&](size_t from) {
    client_->Together([&] {
      for (size_t k = from; k < lookups.size(); ++k) {
        pulls[k] = exchange_->tables().PullAside(lookups[k].table, lookups[k].ids, &unique[k]);
      }
    });
  };
  send(0);
  for (size_t k = 0; k < lookups.size(); ++k) {
    const TableSpec& spec = tables_[static_cast<size_t>(lookups[k].table)].spec;
    const auto await = [&]() -> Status {
      TOWERPS_ASSIGN_OR_RETURN(const ps::PulledVariable got,
                               exchange_->tables().AwaitAside(pulls[k]));
      CopyRows(got, unique[k], 0, lookups[k].ids.size(), spec.dim, &(*out)[k]);
      return Status::Ok();
    };
    TOWERPS_RETURN_IF_ERROR(recover_(
                                await(),
                                [&] {
                                  send(k);
                                  return await();
                                },
                                "registering again and pulling table '" + spec.name + "' again")
                                .WithContext("table '" + spec.name + "'"));
  }
  return Status::Ok();
}

Status TableLookups::PullRows(int t, const uint64_t* ids, int64_t n, float* rows, bool step) {
  const Ids lookup{.table = t, .ids = {ids, static_cast<size_t>(n)}};
  std::vector<Rows> got;
  TOWERPS_RETURN_IF_ERROR(Lookup({&lookup, 1}, &got, step));
  const auto dim = static_cast<size_t>(tables_[static_cast<size_t>(t)].spec.dim);
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    std::memcpy(rows + i * dim, got[0].rows.f32() + got[0].inverse[i] * static_cast<int64_t>(dim),
                dim * sizeof(float));
  }
  return Status::Ok();
}

Result<worker::TableExchange::Gradient> TableLookups::Stage(const Table& table, int t,
                                                            const uint64_t* ids,
                                                            const float* gradients, int64_t n) {
  const auto count = static_cast<size_t>(n);
  Result<Tensor> updates = exchange_->tables().PulledUpdates(t, {ids, count});
  if (!updates.ok()) {
    return InvalidArgumentError("the gradient of table '" + table.spec.name + "' has " +
                                updates.status().message());
  }
  worker::TableExchange::Gradient g{.rows = client_->Allocate({n, table.spec.dim}),
                                    .ids = Tensor::Empty({n}, DType::kUInt64),
                                    .updates = *std::move(updates)};
  if (n > 0) {
    std::memcpy(g.ids.u64(), ids, count * sizeof(uint64_t));
    std::memcpy(g.rows.f32(), gradients, g.rows.byte_size());
  }
  return g;
}

Status TableLookups::AddRows(int t, const uint64_t* ids, const float* gradients, int64_t n) {
  TOWERPS_ASSIGN_OR_RETURN(Table * table, At(t));
  if (table->pushed_once) {
    return InvalidArgumentError("table '" + table->spec.name +
                                "' got rows to add after its one push of the step");
  }
  TOWERPS_ASSIGN_OR_RETURN(auto g, Stage(*table, t, ids, gradients, n));
  table->added.push_back(std::move(g));
  return Status::Ok();
}

Status TableLookups::PushRows(int t, const uint64_t* ids, const float* gradients, int64_t n) {
  TOWERPS_ASSIGN_OR_RETURN(Table * table, At(t));
  if (table->pushed_once || !table->added.empty()) {
    return InvalidArgumentError("the gradient of table '" + table->spec.name +
                                "' was pushed twice in one step (call step() after each backward)");
  }
  TOWERPS_ASSIGN_OR_RETURN(auto g, Stage(*table, t, ids, gradients, n));
  table->added.push_back(std::move(g));
  table->pushed_once = true;
  return Status::Ok();
}

worker::TableExchange::Gradient TableLookups::Merge(int t, Table& table) {
  const int64_t dim = table.spec.dim;
  if (table.added.empty()) {
    return {.rows = Tensor::Empty({0, dim}),
            .ids = Tensor::Empty({0}, DType::kUInt64),
            .updates = Tensor::Empty({0}, DType::kUInt32)};
  }
  if (table.added.size() == 1) return std::move(table.added[0]);
  // Several blocks: each id once, its rows summed in the order the blocks came.
  std::unordered_map<uint64_t, int64_t> at;
  std::vector<uint64_t> ids;
  std::vector<float> sums;
  for (const auto& block : table.added) {
    for (int64_t i = 0; i < block.ids.num_elements(); ++i) {
      const auto [it, fresh] = at.emplace(block.ids.u64()[i], static_cast<int64_t>(ids.size()));
      if (fresh) {
        ids.push_back(block.ids.u64()[i]);
        sums.resize(sums.size() + static_cast<size_t>(dim), 0.0f);
      }
      float* sum = sums.data() + it->second * dim;
      const float* row = block.rows.f32() + i * dim;
      for (int64_t d = 0; d < dim; ++d) sum[d] += row[d];
    }
  }
  // The servers take a push's ids increasing (each block's are; their union need not be).
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ids[a] < ids[b]; });
  std::vector<uint64_t> sorted_ids(ids.size());
  std::vector<float> sorted_sums(sums.size());
  const auto row = static_cast<size_t>(dim);
  for (size_t k = 0; k < order.size(); ++k) {
    sorted_ids[k] = ids[order[k]];
    std::copy_n(sums.begin() + static_cast<ptrdiff_t>(order[k] * row), row,
                sorted_sums.begin() + static_cast<ptrdiff_t>(k * row));
  }
  // Every id was checked as the blocks came: the staging cannot fail.
  auto g = Stage(table, t, sorted_ids.data(), sorted_sums.data(),
                 static_cast<int64_t>(sorted_ids.size()));
  return *std::move(g);
}

Status TableLookups::PushAll(int64_t step, std::span<const Ids> ahead) {
  TOWERPS_RETURN_IF_ERROR(Check(ahead, /*step=*/false));
  for (const Ids& l : ahead) exchange_->tables().FeedNext(l.table, l.ids);
  exchange_->PushTables(
      [&](int t) {
        Table& table = tables_[static_cast<size_t>(t)];
        if (!table.gradient.rows.defined()) table.gradient = Merge(t, table);
        return table.gradient;
      },
      step, /*ahead=*/!ahead.empty());
  return Status::Ok();
}

void TableLookups::Release() {
  for (Table& t : tables_) {
    t.gradient = {};
    t.added.clear();
    t.pushed_once = false;
  }
}

Result<std::vector<ps::HeldRows>> TableLookups::Export(int64_t min_version) {
  return exchange_->tables().ExportRows(min_version);
}

}  // namespace towerps::python
