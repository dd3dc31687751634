#include "ps/table_chunk.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/hash.h"
#include "common/splitmix.h"
#include "ps/optimizer.h"
#include "ps/row_optimizer.h"

namespace towerps::ps {
namespace {

std::string IdText(uint64_t id) { return std::to_string(id); }

}  // namespace

TableChunk::TableChunk(const ChunkSpec& spec, const VariableSpec& variable, const JobConfig& config,
                       TensorAllocator allocate)
    : spec_(spec),
      name_(variable.name),
      init_scale_(variable.init_scale),
      seed_key_(SplitMix64Finalize(Fnv1a(variable.name.data(), variable.name.size(),
                                         Fnv1aU64(config.seed, kFnv1aOffsetBasis)))),
      config_(config),
      allocate_(std::move(allocate)),
      rule_(UpdateRule::ForMode(config)),
      dim_(spec.table_dim),
      slots_(RowSlots(config.table_optimizer.kind)),
      rows_((1 + slots_) * spec.table_dim) {}

void TableChunk::InitialValues(uint64_t id, float* out) const {
  // Uniform in [-s, s) from 24 random bits per value: (2u - 1) is exact in float, so the only
  // rounding is the scaling, the same on every machine.
  uint64_t state = seed_key_ ^ SplitMix64Finalize(id);
  for (int64_t j = 0; j < dim_; ++j) {
    const float u = static_cast<float>(SplitMix64Next(state) >> 40) * 0x1p-24f;
    out[j] = (2.0f * u - 1.0f) * init_scale_;
  }
}

std::string TableChunk::Describe() const {
  return "table " + name_ + " partition " + std::to_string(spec_.chunk_id);
}

float TableChunk::ScheduledRate() const {
  OptimizerOptions rate = config_.optimizer;
  rate.learning_rate = config_.table_optimizer.learning_rate;
  return LearningRateAt(rate, config_.schedule, updates_);
}

bool TableChunk::PullReady(int64_t min_version, int64_t clock) const {
  return rule_->PullReady(version_, min_version, clock);
}

Status TableChunk::CheckIds(const Tensor& ids, bool sorted) const {
  if (ids.dtype() != DType::kUInt64 || ids.rank() != 1) {
    return InvalidArgumentError(Describe() + ": ids must be a uint64 vector, got " +
                                DTypeName(ids.dtype()) + " " + ShapeToString(ids.shape()));
  }
  const uint64_t* id = ids.u64();
  const int partitions = static_cast<int>(config_.servers);
  for (int64_t i = 0; i < ids.num_elements(); ++i) {
    if (spec_.table_rows > 0 && id[i] >= static_cast<uint64_t>(spec_.table_rows)) {
      return InvalidArgumentError("table " + name_ + " has " + std::to_string(spec_.table_rows) +
                                  " rows: id " + IdText(id[i]) + " (element " + std::to_string(i) +
                                  ") is out of range; ids must be below the table's bound");
    }
    if (sorted && i > 0 && id[i] <= id[i - 1]) {
      return InvalidArgumentError(Describe() + ": pushed ids must be unique and increasing, but " +
                                  IdText(id[i]) + " follows " + IdText(id[i - 1]) +
                                  " (deduplicate a batch's ids first: ps/row_batch.h)");
    }
    if (TablePartitionOf(id[i], partitions) != static_cast<int>(spec_.chunk_id)) {
      return InvalidArgumentError(Describe() + ": id " + IdText(id[i]) + " belongs to partition " +
                                  std::to_string(TablePartitionOf(id[i], partitions)));
    }
  }
  return Status::Ok();
}

Status TableChunk::Lookup(const Tensor& ids, int64_t version, Tensor* rows, Tensor* updates) const {
  const bool previous = version != version_;
  if (previous && (version != previous_version_ || version == kNoVersion)) {
    return FailedPreconditionError("version " + std::to_string(version) + " of " + Describe() +
                                   " is no longer held (the partition is at version " +
                                   std::to_string(version_) +
                                   "; servers keep one version back, in sync mode)");
  }
  const int64_t n = ids.num_elements();
  const Shape shape{n, dim_};
  *rows = allocate_ ? allocate_(shape) : Tensor();
  if (!rows->defined()) *rows = Tensor::Empty(shape);
  *updates = Tensor::Empty({n}, DType::kUInt32);
  const uint64_t* id = ids.u64();
  float* out = rows->f32();
  uint32_t* count = updates->u32();
  const size_t row_bytes = static_cast<size_t>(dim_) * sizeof(float);
  for (int64_t i = 0; i < n; ++i, out += dim_) {
    const int64_t r = rows_.Find(id[i]);
    count[i] = r < 0 ? 0 : rows_.updates(r);
    if (previous) {
      auto it = std::lower_bound(previous_ids_.begin(), previous_ids_.end(), id[i]);
      if (it != previous_ids_.end() && *it == id[i]) {
        const size_t k = static_cast<size_t>(it - previous_ids_.begin());
        std::memcpy(out, previous_values_.data() + k * static_cast<size_t>(dim_), row_bytes);
        count[i] = count[i] > 0 ? count[i] - 1 : 0;
        continue;
      }
    }
    if (r < 0) {
      InitialValues(id[i], out);
    } else {
      std::memcpy(out, rows_.row(r), row_bytes);
    }
  }
  return Status::Ok();
}

Status TableChunk::CheckShape(const Contribution& c) const {
  TOWERPS_RETURN_IF_ERROR(CheckIds(c.ids, /*sorted=*/true));
  const int64_t n = c.ids.num_elements();
  const Tensor& g = c.gradient;
  if (g.dtype() != DType::kFloat32 || g.rank() != 2 || g.dim(0) != n || g.dim(1) != dim_) {
    return InvalidArgumentError(Describe() + ": a push of " + std::to_string(n) +
                                " ids needs gradient rows of float32 [" + std::to_string(n) + ", " +
                                std::to_string(dim_) + "], got " + DTypeName(g.dtype()) + " " +
                                ShapeToString(g.shape()));
  }
  const Tensor& u = c.pulled_updates;
  if (u.dtype() != DType::kUInt32 || u.rank() != 1 || u.dim(0) != n) {
    return InvalidArgumentError(Describe() + ": a push of " + std::to_string(n) +
                                " ids needs their pulled update counts as uint32 [" +
                                std::to_string(n) + "], got " + DTypeName(u.dtype()) + " " +
                                ShapeToString(u.shape()));
  }
  return Status::Ok();
}

Result<PushOutcome> TableChunk::Push(Contribution c, ShardCounters* counters, bool replace) {
  if (c.worker < 0 || c.worker >= config_.workers) {
    return InvalidArgumentError("worker rank " + std::to_string(c.worker) + " is outside 0.." +
                                std::to_string(config_.workers - 1));
  }
  TOWERPS_RETURN_IF_ERROR(CheckShape(c));
  counters->gradients_received.fetch_add(1, std::memory_order_relaxed);
  return rule_->Push(std::move(c), replace, *this, *counters);
}

void TableChunk::SumById(const FormedUpdate& update, ShardCounters& counters) {
  // Every (contribution, row) in rank order, then sorted by id, stably: a row's gradients stay
  // in rank order, so its sum is formed in that order whatever arrived first.
  struct Entry {
    uint64_t id;
    uint32_t contribution;
    uint32_t row;
  };
  std::vector<Entry> entries;
  for (uint32_t c = 0; c < update.gradients.size(); ++c) {
    const Contribution& contribution = *update.gradients[c];
    const uint64_t* ids = contribution.ids.u64();
    const uint32_t* pulled = contribution.pulled_updates.u32();
    for (uint32_t i = 0; i < contribution.ids.num_elements(); ++i) {
      entries.push_back({ids[i], c, i});
      const int64_t r = rows_.Find(ids[i]);
      const int64_t now = r < 0 ? 0 : rows_.updates(r);
      counters.RecordRowStaleness(now - static_cast<int64_t>(pulled[i]));
    }
  }
  if (update.gradients.size() > 1) {
    std::stable_sort(entries.begin(), entries.end(),
                     [](const Entry& a, const Entry& b) { return a.id < b.id; });
  }
  sum_ids_.clear();
  sums_.clear();
  for (const Entry& e : entries) {
    const float* g = update.gradients[e.contribution]->gradient.f32() + e.row * dim_;
    if (sum_ids_.empty() || sum_ids_.back() != e.id) {
      sum_ids_.push_back(e.id);
      sums_.insert(sums_.end(), g, g + dim_);
      continue;
    }
    float* sum = sums_.data() + sums_.size() - static_cast<size_t>(dim_);
    for (int64_t j = 0; j < dim_; ++j) sum[j] += g[j];
  }
}

void TableChunk::Apply(const FormedUpdate& update, ShardCounters& counters) {
  const auto start = std::chrono::steady_clock::now();
  const bool retain = rule_->RetainsPreviousVersion();
  if (retain) {
    previous_version_ = version_;
    previous_ids_.clear();
    previous_values_.clear();
  }
  ++version_;
  if (update.gradients.empty()) return;  // every gradient refused: the version still counts it
  SumById(update, counters);
  const float scale = 1.0f / static_cast<float>(update.divisor);
  int64_t added_rows = 0;
  for (size_t k = 0; k < sum_ids_.size(); ++k) {
    bool added = false;
    const int64_t r = rows_.Insert(sum_ids_[k], &added);
    float* row = rows_.row(r);
    if (added) {
      InitialValues(sum_ids_[k], row);
      InitRowState(config_, row, dim_, row + dim_);
      ++added_rows;
    }
    if (retain) {
      previous_ids_.push_back(sum_ids_[k]);  // sorted: SumById's order
      previous_values_.insert(previous_values_.end(), row, row + dim_);
    }
    rows_.CountUpdate(r);
    ApplyRowUpdate(config_, {.grad = sums_.data() + k * static_cast<size_t>(dim_),
                             .scale = scale,
                             .lr = update.lr,
                             .t = rows_.updates(r),
                             .w = row,
                             .state = row + dim_,
                             .dim = dim_});
  }
  ++updates_;
  counters.updates_applied.fetch_add(1, std::memory_order_relaxed);
  counters.table_rows.fetch_add(static_cast<uint64_t>(added_rows), std::memory_order_relaxed);
  counters.aggregation_nanos.fetch_add(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count()),
      std::memory_order_relaxed);
}

TableState TableChunk::Snapshot() const {
  TableState s;
  s.variable_id = spec_.variable_id;
  s.chunk_id = spec_.chunk_id;
  s.version = version_;
  s.updates = updates_;
  s.worker_clocks = rule_->Save(version_, /*replica=*/false).worker_clocks;
  s.dim = dim_;
  s.slots = slots_;
  const int64_t n = rows_.size();
  const int64_t stride = rows_.stride();
  s.ids = Tensor::Empty({n}, DType::kUInt64);
  s.rows = Tensor::Empty({n, stride});
  s.row_updates = Tensor::Empty({n}, DType::kUInt32);
  for (int64_t r = 0; r < n; ++r) {
    s.ids.u64()[r] = rows_.id(r);
    s.row_updates.u32()[r] = rows_.updates(r);
    std::memcpy(s.rows.f32() + r * stride, rows_.row(r),
                static_cast<size_t>(stride) * sizeof(float));
  }
  return s;
}

Status TableChunk::Restore(const TableState& s) {
  const int64_t n = s.ids.num_elements();
  const int64_t stride = rows_.stride();
  const std::string where = Describe() + ": its checkpointed state ";
  if (s.dim != dim_ || s.slots != slots_) {
    return CorruptionError(where + "has rows of dim " + std::to_string(s.dim) + " with " +
                           std::to_string(s.slots) + " optimizer slots, expected " +
                           std::to_string(dim_) + " with " + std::to_string(slots_));
  }
  if (s.ids.dtype() != DType::kUInt64 || s.rows.dtype() != DType::kFloat32 ||
      s.rows.num_elements() != n * stride || s.row_updates.dtype() != DType::kUInt32 ||
      s.row_updates.num_elements() != n || s.version < 0 || s.updates < 0) {
    return CorruptionError(where + "does not add up");
  }
  if (Status ids = CheckIds(s.ids, /*sorted=*/false); !ids.ok()) {
    return CorruptionError(where + "holds " + std::string(ids.message()));
  }
  rows_.Clear();
  for (int64_t r = 0; r < n; ++r) {
    bool added = false;
    const int64_t row = rows_.Insert(s.ids.u64()[r], &added);
    if (!added) {
      rows_.Clear();
      return CorruptionError(where + "holds id " + IdText(s.ids.u64()[r]) + " twice");
    }
    std::memcpy(rows_.row(row), s.rows.f32() + r * stride,
                static_cast<size_t>(stride) * sizeof(float));
    rows_.set_updates(row, s.row_updates.u32()[r]);
  }
  version_ = s.version;
  updates_ = s.updates;
  rule_->Load(RuleState{s.worker_clocks, {}}, version_);
  previous_version_ = kNoVersion;
  previous_ids_.clear();
  previous_values_.clear();
  return Status::Ok();
}

}  // namespace towerps::ps
