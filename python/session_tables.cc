// Session's embedding tables: rows pulled and pushed by id (python/session.h).
#include <cstring>
#include <string>

#include "common/finite.h"
#include "python/session.h"
#include "worker/train/join_job.h"

namespace towerps::python {

std::vector<uint32_t> Session::TableVariables() const {
  std::vector<uint32_t> ids;
  for (const Table& t : tables_) ids.push_back(t.variable);
  return ids;
}

bool Session::FirstStepExact() const {
  return o_.job.mode == ps::UpdateMode::kSync && iter_ == start_iter_ && start_exact_;
}

int64_t Session::TableVersion() const { return o_.job.mode == ps::UpdateMode::kSync ? iter_ : 0; }

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
  if (table.pushed) {
    return InvalidArgumentError("table '" + table.spec.name +
                                "' was pulled after its push in one step (call step() first)");
  }
  Tensor request = Tensor::Empty({n}, DType::kUInt64);
  if (n > 0) std::memcpy(request.u64(), ids, static_cast<size_t>(n) * sizeof(uint64_t));
  auto pulled = client_->Pull({.variable_id = table.variable,
                               .ids = request,
                               .min_version = TableVersion(),
                               .clock = iter_,
                               .exact = FirstStepExact()});
  TOWERPS_ASSIGN_OR_RETURN(const ps::PulledVariable got,
                           worker::AwaitUnlessStopped(pulled, o_.stop));
  const size_t row_bytes = static_cast<size_t>(table.spec.dim) * sizeof(float);
  if (n > 0) std::memcpy(rows, got.rows.f32(), static_cast<size_t>(n) * row_bytes);
  for (int64_t i = 0; i < n; ++i) table.updates[ids[i]] = got.updates.u32()[i];
  return Status::Ok();
}

Status Session::PushRows(int t, const uint64_t* ids, const float* gradients, int64_t n) {
  TOWERPS_ASSIGN_OR_RETURN(Table * at, TableAt(t));
  Table& table = *at;
  const std::string& name = table.spec.name;
  if (table.pushed) {
    return InvalidArgumentError("the gradient of table '" + name +
                                "' was pushed twice in one step (call step() after each backward)");
  }
  const int64_t dim = table.spec.dim;
  table.ids = Tensor::Empty({n}, DType::kUInt64);
  table.gradients = client_->Allocate({n, dim});
  table.pulled_updates = Tensor::Empty({n}, DType::kUInt32);
  for (int64_t i = 0; i < n; ++i) {
    const auto found = table.updates.find(ids[i]);
    if (found == table.updates.end()) {
      return InvalidArgumentError("the gradient of table '" + name + "' has row " +
                                  std::to_string(ids[i]) + ", which this step did not pull");
    }
    table.ids.u64()[i] = ids[i];
    table.pulled_updates.u32()[i] = found->second;
  }
  if (n > 0) {
    std::memcpy(table.gradients.f32(), gradients, static_cast<size_t>(n * dim) * sizeof(float));
  }
  if (const int64_t bad = FindNonFinite(table.gradients.f32(), n * dim); bad >= 0) {
    return FailedPreconditionError("diverged at step " + std::to_string(iter_) +
                                   " (gradient of table '" + name +
                                   "' = " + DescribeValue(table.gradients.f32()[bad]) +
                                   " at element " + std::to_string(bad) + ")");
  }
  table.pushed = true;
  const bool sync = o_.job.mode == ps::UpdateMode::kSync;
  table.push = client_->Push({.variable_id = table.variable,
                              .version = TableVersion(),
                              .clock = iter_,
                              .gradient = table.gradients,
                              .replace_pending = sync && iter_ == start_iter_ && !start_exact_,
                              .ids = table.ids,
                              .pulled_updates = table.pulled_updates});
  return Status::Ok();
}

Status Session::FinishTableStep() {
  for (int t = 0; t < num_tables(); ++t) {
    // Every partition counts every worker's push, rows or none (sync waits for all of them).
    if (!tables_[static_cast<size_t>(t)].pushed) {
      TOWERPS_RETURN_IF_ERROR(PushRows(t, nullptr, nullptr, 0));
    }
  }
  Status first = Status::Ok();
  for (Table& table : tables_) {
    Result<ps::PushReport> r = worker::AwaitUnlessStopped(table.push, o_.stop);
    if (first.ok() && !r.ok()) first = r.status().WithContext("table '" + table.spec.name + "'");
    table.pushed = false;
    table.updates.clear();
  }
  return first;
}

}  // namespace towerps::python
