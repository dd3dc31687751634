#include "bench/local_tables.h"

#include <algorithm>

namespace towerps::bench {

LocalTables::LocalTables(worker::Model<float>& model, uint64_t seed, float learning_rate,
                         float initial_accumulator)
    : model_(model),
      adagrad_{.kind = ps::OptimizerKind::kAdagrad,
               .learning_rate = learning_rate,
               .initial_accumulator = initial_accumulator} {
  for (int t = 0; t < model.num_tables(); ++t) {
    const EmbeddingSpec& spec = model.table(t);
    tables_.push_back({.input = {.field_offset = model.table_field_offset(t),
                                 .fields = spec.fields,
                                 .bag = model.table_bag(t)},
                       .dim = spec.options.dim,
                       .initial = ps::InitialRows(seed, spec.name, spec.options.init_scale)});
  }
}

int64_t LocalTables::RowOf(Table& t, uint64_t id) {
  const auto [it, added] = t.index.try_emplace(id, static_cast<int64_t>(t.index.size()));
  if (added) {
    t.values.resize(t.values.size() + static_cast<size_t>(t.dim));
    t.initial.Fill(id, t.dim, t.values.data() + t.values.size() - t.dim);
    t.accumulators.resize(t.values.size(), ps::OptimizerSlotInitialValue(adagrad_));
  }
  return it->second;
}

void LocalTables::Prepare(const worker::Batch& batch) {
  for (size_t k = 0; k < tables_.size(); ++k) {
    Table& t = tables_[k];
    t.batch_ids = ps::Deduplicate(worker::TableIds(batch, t.input), 1);
    const int64_t unique = t.batch_ids.size();
    t.batch_rows.resize(static_cast<size_t>(unique));
    t.gathered.resize(static_cast<size_t>(unique * t.dim));
    const uint64_t* unique_ids = t.batch_ids.ids.u64();
    for (int64_t u = 0; u < unique; ++u) {
      t.batch_rows[u] = RowOf(t, unique_ids[u]);
      std::copy_n(t.values.data() + t.batch_rows[u] * t.dim, t.dim, t.gathered.data() + u * t.dim);
    }
    model_.SetTableRows(static_cast<int>(k), t.gathered.data(), unique, t.batch_ids.inverse.data(),
                        worker::BagOffsets(batch, t.input));
  }
}

void LocalTables::Update() {
  for (size_t k = 0; k < tables_.size(); ++k) {
    Table& t = tables_[k];
    const std::vector<float>& grad = model_.table_gradient(static_cast<int>(k));
    for (size_t u = 0; u < t.batch_rows.size(); ++u) {
      float* w = t.values.data() + t.batch_rows[u] * t.dim;
      const float* g = grad.data() + u * t.dim;
      ps::ApplyUpdate(adagrad_, {.grads = &g,
                                 .w_in = w,
                                 .w_out = w,
                                 .slot0 = t.accumulators.data() + t.batch_rows[u] * t.dim,
                                 .n = t.dim,
                                 .lr = adagrad_.learning_rate});
    }
  }
}

int64_t LocalTables::rows() const {
  int64_t n = 0;
  for (const Table& t : tables_) n += static_cast<int64_t>(t.index.size());
  return n;
}

}  // namespace towerps::bench
