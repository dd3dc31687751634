// Session's embedding tables: each lookup fed to the step's TableExchange, which pulls its rows
// at the step's version; each table's gradient rows handed to it at the step's end
// (python/session.h). The exchange's rules are worker/train's: nothing is re-derived here.
#include <cstring>
#include <string>

#include "python/session.h"

namespace towerps::python {

std::vector<uint32_t> Session::TableVariables() const {
  std::vector<uint32_t> ids;
  for (const Table& t : tables_) ids.push_back(t.variable);
  return ids;
}

Result<Session::Table*> Session::TableAt(int t) {
  if (t < 0 || t >= num_tables()) {
    return InvalidArgumentError("no table " + std::to_string(t) + " (the model has " +
                                std::to_string(num_tables()) + ")");
  }
  return &tables_[static_cast<size_t>(t)];
}

Status Session::PullRows(int t, const uint64_t* ids, int64_t n, float* rows) {
  TOWERPS_ASSIGN_OR_RETURN(Table * found, TableAt(t));
  Table& table = *found;
  if (table.gradient.rows.defined()) {
    return InvalidArgumentError("table '" + table.spec.name +
                                "' was pulled after its push in one step (call step() first)");
  }
  const size_t first = exchange_->tables().Feed(t, {ids, static_cast<size_t>(n)});
  const auto dim = static_cast<size_t>(table.spec.dim);
  const auto await = [&] {
    return exchange_->AwaitTableRows(
        t, [&](int, const ps::PulledVariable& got, const ps::UniqueIds& unique, const uint32_t*) {
          for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
            std::memcpy(rows + i * dim, got.rows.f32() + unique.inverse[first + i] * dim,
                        dim * sizeof(float));
          }
        });
  };
  // Mid-step, a failover loses only this pull: the servers still hold this step's version
  // (the step before is complete everywhere, its values here), so the same pull goes again.
  return RetryAfterRestart(
             await(),
             [&] {
               TOWERPS_RETURN_IF_ERROR(Register().status());
               exchange_->tables().Feed(t, {});
               return await();
             },
             "registering again and pulling table '" + table.spec.name + "' again")
      .WithContext("table '" + table.spec.name + "'");
}

Status Session::PushRows(int t, const uint64_t* ids, const float* gradients, int64_t n) {
  TOWERPS_ASSIGN_OR_RETURN(Table * at, TableAt(t));
  Table& table = *at;
  const std::string& name = table.spec.name;
  if (table.gradient.rows.defined()) {
    return InvalidArgumentError("the gradient of table '" + name +
                                "' was pushed twice in one step (call step() after each backward)");
  }
  const auto count = static_cast<size_t>(n);
  Result<Tensor> updates = exchange_->tables().PulledUpdates(t, {ids, count});
  if (!updates.ok()) {
    return InvalidArgumentError("the gradient of table '" + name + "' has " +
                                updates.status().message());
  }
  worker::TableExchange::Gradient g{.rows = client_->Allocate({n, table.spec.dim}),
                                    .ids = Tensor::Empty({n}, DType::kUInt64),
                                    .updates = *std::move(updates)};
  if (n > 0) {
    std::memcpy(g.ids.u64(), ids, count * sizeof(uint64_t));
    std::memcpy(g.rows.f32(), gradients, g.rows.byte_size());
  }
  table.gradient = std::move(g);
  return Status::Ok();
}

void Session::PushTables(int64_t step) {
  exchange_->PushTables(
      [&](int t) {
        Table& table = tables_[static_cast<size_t>(t)];
        // Every partition counts every worker's push, rows or none (sync waits for them all).
        if (!table.gradient.rows.defined()) {
          table.gradient = {.rows = Tensor::Empty({0, table.spec.dim}),
                            .ids = Tensor::Empty({0}, DType::kUInt64),
                            .updates = Tensor::Empty({0}, DType::kUInt32)};
        }
        return table.gradient;
      },
      step, /*next=*/nullptr);
}

}  // namespace towerps::python
