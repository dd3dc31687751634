#include "ps/server/table_chunk.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "ps/server/optimizer.h"
#include "ps/server/row_optimizer.h"
#include "ps/server/table_requests.h"

namespace towerps::ps {

TableChunk::TableChunk(const ChunkSpec& spec, const VariableSpec& variable, const JobConfig& config,
                       TensorAllocator allocate, RowDisk* disk)
    : spec_(spec),
      name_(variable.name),
      initial_(config.seed, variable),
      config_(config),
      allocate_(std::move(allocate)),
      rule_(UpdateRule::ForMode(config)),
      dim_(spec.table_dim),
      optimizer_(config),
      slots_(optimizer_.slots()),
      policy_(RowPolicy::ForTable(config, variable)),
      rows_(TableRows::ForTable(policy_.policy(), spec,
                                config.TablePartitionsHeld(policy_.policy()), (1 + slots_) * dim_,
                                disk)),
      previous_(spec.table_dim) {}

void TableChunk::InitialValues(uint64_t id, float* out) const { initial_.Fill(id, dim_, out); }

std::string TableChunk::Describe() const {
  return "table " + name_ + " partition " + std::to_string(spec_.chunk_id);
}

float TableChunk::ScheduledRate() const {
  OptimizerOptions rate = config_.optimizer;
  rate.learning_rate = config_.table_optimizer.learning_rate;
  return LearningRateAt(rate, config_.schedule, config_.ScheduleStep(updates_));
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
  const int partitions = spec_.table_partitions;
  const int64_t n = ids.num_elements();
  for (int64_t i = 0; i < n; ++i) {
    if (spec_.table_rows > 0 && id[i] >= static_cast<uint64_t>(spec_.table_rows)) {
      return InvalidArgumentError("table " + name_ + " has " + std::to_string(spec_.table_rows) +
                                  " rows: id " + std::to_string(id[i]) + " (element " +
                                  std::to_string(i) +
                                  ") is out of range; ids must be below the table's bound");
    }
    if (sorted && i > 0 && id[i] <= id[i - 1]) {
      return InvalidArgumentError(Describe() + ": pushed ids must be unique and increasing, but " +
                                  std::to_string(id[i]) + " follows " + std::to_string(id[i - 1]) +
                                  " (deduplicate a batch's ids first: job/row_batch.h)");
    }
    if (partitions > 1 && TablePartitionOf(id[i], partitions) != static_cast<int>(spec_.chunk_id)) {
      return InvalidArgumentError(Describe() + ": id " + std::to_string(id[i]) +
                                  " belongs to partition " +
                                  std::to_string(TablePartitionOf(id[i], partitions)));
    }
  }
  return Status::Ok();
}

Status TableChunk::Lookup(const Tensor& ids, int64_t version, Tensor* rows, Tensor* updates) const {
  const bool previous = version != version_;
  if (previous && (version != previous_.version() || version == kNoVersion)) {
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
  const RowStore& memory = rows_.memory();
  std::vector<int64_t> found(static_cast<size_t>(n));
  memory.FindAll(id, n, found.data());
  std::vector<uint8_t> on_disk(static_cast<size_t>(n));
  rows_.ReadMisses(id, static_cast<size_t>(n), found.data(), [&](size_t i, const DiskRow& row) {
    std::memcpy(out + static_cast<int64_t>(i) * dim_, row.values, row_bytes);
    count[i] = row.updates;
    on_disk[i] = 1;
  });
  constexpr int64_t kAhead = 4;  // rows prefetched this many ahead of their copy
  for (int64_t i = 0; i < std::min(n, kAhead); ++i) {
    if (found[i] >= 0) memory.PrefetchRow(found[i]);
  }
  for (int64_t i = 0; i < n; ++i, out += dim_) {
    if (i + kAhead < n && found[i + kAhead] >= 0) memory.PrefetchRow(found[i + kAhead]);
    const int64_t r = found[i];
    if (!on_disk[i]) count[i] = r < 0 ? 0 : memory.updates(r);
    if (const float* before = previous ? previous_.Find(id[i]) : nullptr; before != nullptr) {
      std::memcpy(out, before, row_bytes);
      count[i] = count[i] > 0 ? count[i] - 1 : 0;
      continue;
    }
    if (on_disk[i]) continue;  // read above
    if (r < 0) {
      InitialValues(id[i], out);
    } else {
      std::memcpy(out, memory.row(r), row_bytes);
    }
  }
  return Status::Ok();
}

void TableChunk::Dump(Tensor* ids, Tensor* rows, Tensor* updates) const {
  const int64_t n = rows_.size();
  const Shape shape{n, dim_};
  *rows = allocate_ ? allocate_(shape) : Tensor();
  if (!rows->defined()) *rows = Tensor::Empty(shape);
  *ids = Tensor::Empty({n}, DType::kUInt64);
  *updates = Tensor::Empty({n}, DType::kUInt32);
  int64_t i = 0;
  rows_.ForEach([&](const RowView& row) {
    ids->u64()[i] = row.id;
    updates->u32()[i] = row.updates;
    std::memcpy(rows->f32() + i * dim_, row.values, static_cast<size_t>(dim_) * sizeof(float));
    ++i;
  });
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
  TOWERPS_RETURN_IF_ERROR(CheckShape(c));
  return rule_->Push(std::move(c), replace, *this, *counters);
}

void TableChunk::FindOrAddRows() {
  const size_t rows = pushed_.rows();
  group_rows_.resize(rows);
  RowStore& memory = rows_.memory();
  constexpr size_t kSlotAhead = 16;  // map slots prefetched this many ids ahead
  for (size_t g = 0; g < std::min(kSlotAhead, rows); ++g) memory.Prefetch(pushed_.id(g));
  std::vector<uint64_t> missing;  // one probe of the map per id: the rest ask for these only
  for (size_t g = 0; g < rows; ++g) {
    if (g + kSlotAhead < rows) memory.Prefetch(pushed_.id(g + kSlotAhead));
    group_rows_[g] = memory.Find(pushed_.id(g));
    if (group_rows_[g] < 0) missing.push_back(pushed_.id(g));
  }
  if (rows_.tiered()) rows_.Load(missing, rows);  // the update's rows on disk come in first
  for (size_t g = 0; g < rows; ++g) {
    const uint64_t id = pushed_.id(g);
    if (group_rows_[g] >= 0) continue;  // held: Load and Insert move no row
    if (policy_.active() && memory.Find(id) < 0 && !policy_.Admit(id, version_)) {
      group_rows_[g] = -1;  // not admitted: no row, its gradients dropped
      policy_.Dropped(1);   // per id and update, as a backup fed the step's sums counts it
      continue;
    }
    bool added = false;
    group_rows_[g] = memory.Insert(id, &added);
    if (added) {
      float* row = memory.row(group_rows_[g]);
      InitialValues(id, row);
      optimizer_.InitState(row, dim_, row + dim_);
    }
  }
}

void TableChunk::BeginUpdate() {
  if (rule_->RetainsPreviousVersion()) previous_.Begin(version_);
  ++version_;
}

void TableChunk::UpdateRows(const float* sums, float scale, float lr, bool count_staleness,
                            ShardCounters& counters) {
  ShardCounters::Histogram staleness{};
  const bool retain = rule_->RetainsPreviousVersion();
  constexpr size_t kRowAhead = 8;  // rows' values and gradients prefetched this many rows ahead
  const size_t rows = group_rows_.size();
  RowStore& memory = rows_.memory();
  auto prefetch = [&](size_t g) {
    if (group_rows_[g] < 0) return;
    memory.PrefetchRow(group_rows_[g]);
    if (sums != nullptr) return;
    // The pushed gradients are read once each, in id order: unfetched, their loads stalled the
    // update more than the rows' did.
    pushed_.Prefetch(g);
  };
  for (size_t g = 0; g < std::min(kRowAhead, rows); ++g) prefetch(g);
  // The rows go to the optimizer kBatch at a time, each multi-worker row's sum in its own part of
  // sum_.
  constexpr size_t kBatch = 64;
  RowUpdate batch[kBatch];
  size_t batched = 0;
  sum_.resize(kBatch * static_cast<size_t>(dim_));
  for (size_t g = 0; g < rows; ++g) {
    if (g + kRowAhead < rows) prefetch(g + kRowAhead);
    const int64_t r = group_rows_[g];
    if (r < 0) continue;  // not admitted
    float* row = memory.row(r);
    if (retain) previous_.Keep(pushed_.id(g), row);  // increasing: the ids' order
    if (count_staleness) {  // each gradient's row staleness, before the row's count moves
      const uint32_t now = memory.updates(r);
      pushed_.ForEachEntry(g, [&](const Contribution& c, uint32_t i) {
        ++staleness[ShardCounters::Bucket(static_cast<int64_t>(now) - c.pulled_updates.u32()[i])];
      });
    }
    memory.CountUpdate(r);
    rows_.Changed(pushed_.id(g));
    policy_.Updated(memory, r, version_);
    float* sum = sum_.data() + batched * static_cast<size_t>(dim_);
    batch[batched++] = {.grad = sums ? sums + static_cast<int64_t>(g) * dim_ : pushed_.Sum(g, sum),
                        .scale = scale,
                        .lr = lr,
                        .t = memory.updates(r),
                        .w = row,
                        .state = row + dim_,
                        .dim = dim_};
    if (batched == kBatch) {
      optimizer_.Apply(batch, batched);
      batched = 0;
    }
  }
  optimizer_.Apply(batch, batched);
  if (count_staleness) counters.AddRowStaleness(staleness);
}

void TableChunk::FinishUpdate(ShardCounters& counters) {
  ++updates_;
  counters.updates_applied.fetch_add(1, std::memory_order_relaxed);
  Evict();
}

void TableChunk::Evict() {
  const bool retain = rule_->RetainsPreviousVersion();
  RowStore& memory = rows_.memory();
  auto keep = [&](uint64_t id, const float* values) {
    rows_.Evicted(id);  // a change for the next checkpoint's delta too
    if (retain) previous_.KeepEvicted(id, values);
  };
  policy_.EndUpdate(
      memory, version_, [&](int64_t r) { keep(memory.id(r), memory.row(r)); },
      [&](const std::vector<std::pair<uint64_t, int64_t>>& ids) {
        return rows_.ExpireOnDisk(ids, keep);
      });
  if (retain) previous_.FinishEvictions();
  rows_.Spill();  // the values stay as they are: nothing to keep
  policy_.Report(rows_.size(), counters_);
  rows_.Report(counters_);
}

void TableChunk::Apply(const FormedUpdate& update, ShardCounters& counters) {
  const UpdateTimer timer(counters.aggregation_nanos, counters.busy);
  BeginUpdate();
  if (update.gradients.empty()) {  // every gradient refused: the version still counts it
    if (step_hook_) step_hook_(version_ - 1, {}, 0);  // and the backup's
    Evict();
    return;
  }
  pushed_.Form(update.gradients, dim_);
  FindOrAddRows();
  const float scale = 1.0f / static_cast<float>(update.divisor);
  if (!step_hook_) {
    UpdateRows(/*sums=*/nullptr, scale, update.lr, /*count_staleness=*/true, counters);
    FinishUpdate(counters);
    return;
  }
  // Replicated sync: the step's sums, formed as the rows take them, go to the backup, which
  // applies the same (ApplyStep), so both hold the same bits.
  const auto rows = static_cast<int64_t>(group_rows_.size());
  Tensor ids = Tensor::Empty({rows}, DType::kUInt64);
  Tensor sums = allocate_ ? allocate_({rows, dim_}) : Tensor();
  if (!sums.defined()) sums = Tensor::Empty({rows, dim_});
  for (int64_t g = 0; g < rows; ++g) {
    const auto i = static_cast<size_t>(g);
    ids.u64()[g] = pushed_.id(i);
    float* out = sums.f32() + g * dim_;
    if (const float* sum = pushed_.Sum(i, out); sum != out) {
      std::copy_n(sum, dim_, out);
    }
  }
  step_hook_(version_ - 1, {ids, sums}, update.divisor);
  UpdateRows(sums.f32(), scale, update.lr, /*count_staleness=*/true, counters);
  FinishUpdate(counters);
}

Status TableChunk::ApplyStep(int64_t step, const Tensor& ids, const Tensor& sums, int k,
                             ShardCounters* counters) {
  if (step != version_) {
    return FailedPreconditionError("step " + std::to_string(step) + " replayed on " + Describe() +
                                   " at version " + std::to_string(version_));
  }
  const int64_t n = k > 0 ? ids.num_elements() : 0;
  if (k < 0 || k > config_.workers ||
      (k > 0 && (sums.dtype() != DType::kFloat32 || sums.num_elements() != n * dim_))) {
    return InvalidArgumentError("a step's sum of " + std::to_string(k) + " gradients for " +
                                Describe() + " does not fit it");
  }
  if (k > 0) TOWERPS_RETURN_IF_ERROR(CheckIds(ids, /*sorted=*/true));
  const UpdateTimer timer(counters->aggregation_nanos, counters->busy);
  const float lr = ScheduledRate();
  BeginUpdate();
  if (k > 0) {
    pushed_.FormIds(ids.u64(), n);
    FindOrAddRows();
    UpdateRows(sums.f32(), 1.0f / static_cast<float>(k), lr, /*count_staleness=*/false, *counters);
    FinishUpdate(*counters);
  } else {
    Evict();
  }
  rule_->Replayed(step);
  return Status::Ok();
}

TableState TableChunk::Snapshot(bool replica, bool changes, bool on_tier) const {
  TableState s;
  static_cast<HolderStateHead&>(s) = {spec_.variable_id, spec_.chunk_id, version_, updates_};
  RuleState rule = rule_->Save(version_, replica);
  s.worker_clocks = std::move(rule.worker_clocks);
  if (replica) {
    s.pending = std::move(rule.pending);  // gradients are never written after they arrive
    previous_.Save(&s);
  }
  s.dim = dim_;
  s.slots = slots_;
  changes ? rows_.SaveChanges(&s) : rows_.Save(&s, on_tier);
  policy_.Save(&s);
  return s;
}

Status TableChunk::Restore(const TableState& s) {
  const int64_t n = s.ids.num_elements();
  const int64_t stride = rows_.memory().stride();
  const std::string where = Describe() + ": its saved state ";
  if (s.dim != dim_ || s.slots != slots_) {
    return CorruptionError(where + "has rows of dim " + std::to_string(s.dim) + " with " +
                           std::to_string(s.slots) + " optimizer slots, expected " +
                           std::to_string(dim_) + " with " + std::to_string(slots_));
  }
  if (s.ids.dtype() != DType::kUInt64 || s.rows.dtype() != DType::kFloat32 ||
      s.rows.num_elements() != n * stride || s.row_updates.dtype() != DType::kUInt32 ||
      s.row_updates.num_elements() != n || s.row_last_update.dtype() != DType::kUInt64 ||
      s.row_last_update.num_elements() != n || s.version < 0 || s.updates < 0 ||
      (s.on_tier && !rows_.tiered())) {
    return CorruptionError(
        where + (s.on_tier ? "keeps rows on a disk tier this server lacks" : "does not add up"));
  }
  if (Status ids = CheckIds(s.ids, /*sorted=*/false); !ids.ok()) {
    return CorruptionError(where + "holds " + std::string(ids.message()));
  }
  TOWERPS_RETURN_IF_ERROR(CheckReplicaExtras(s));
  std::vector<uint64_t> held(s.ids.u64(), s.ids.u64() + n);
  std::sort(held.begin(), held.end());
  if (auto twice = std::adjacent_find(held.begin(), held.end()); twice != held.end()) {
    return CorruptionError(where + "holds id " + std::to_string(*twice) + " twice");
  }
  if (Status pending = policy_.Check(s, held); !pending.ok()) {
    return CorruptionError(where + std::string(pending.message()));
  }
  if (Status ids = CheckIds(s.admission_ids, /*sorted=*/true); !ids.ok()) {
    return CorruptionError(where + "holds pending " + std::string(ids.message()));
  }
  // Checked whole: from here nothing fails.
  rows_.Load(s);
  version_ = s.version;
  updates_ = s.updates;
  rule_->Load(RuleState{s.worker_clocks, s.pending}, version_);
  previous_.Load(s);
  policy_.Load(s);
  policy_.Rebuild(s.version, rows_);
  return Status::Ok();
}

Status TableChunk::CheckReplicaExtras(const TableState& s) const {
  const std::string where = Describe() + ": its replicated state ";
  if (Status previous = previous_.Check(s); !previous.ok()) {
    return CorruptionError(where + std::string(previous.message()));
  }
  if (s.previous_version != kNoVersion) {
    if (Status ids = CheckIds(s.previous_ids, /*sorted=*/true); !ids.ok()) {
      return CorruptionError(where + "holds previous " + std::string(ids.message()));
    }
  }
  for (const auto& [rank, c] : s.pending) {
    if (rank < 0 || rank >= config_.workers || c.worker != rank) {
      return CorruptionError(where + "holds a pending push of worker " + std::to_string(rank));
    }
    if (c.refused) continue;
    if (Status shape = CheckShape(c); !shape.ok()) {
      return CorruptionError(where + "holds a pending push that " + std::string(shape.message()));
    }
  }
  return Status::Ok();
}

Result<bool> TableChunk::Init(const IncomingMessage& /*request*/) {
  return InvalidArgumentError("table variable " + std::to_string(spec_.variable_id) +
                              " takes no initial value: its rows are drawn when first updated");
}

Status TableChunk::ReadPull(const IncomingMessage& request, PullAsk* ask) const {
  ask->every_row = request.header().getEveryRow();
  TOWERPS_ASSIGN_OR_RETURN(ask->ids, ReadPullIds(request, *this));
  return Status::Ok();
}

Result<Contribution> TableChunk::ReadPush(const IncomingMessage& request, int worker,
                                          PullAsk* next) const {
  TOWERPS_ASSIGN_OR_RETURN(RowPush push, ReadRowPush(request, *this));
  push.contribution.worker = worker;
  if (next != nullptr) next->ids = std::move(push.next_ids);
  return std::move(push.contribution);
}

Status TableChunk::AddPullValues(const PullAsk& ask, OutgoingMessage* reply) const {
  const int64_t version = ask.exact ? ask.version : version_;
  Tensor rows, updates, ids;
  if (ask.every_row) {
    Dump(&ids, &rows, &updates);
  } else {
    TOWERPS_RETURN_IF_ERROR(Lookup(ask.ids, version, &rows, &updates));
  }
  reply->header().setVersion(version);
  reply->AddTensor(rows, spec_.variable_id, spec_.chunk_id);
  reply->AddTensor(updates, spec_.variable_id, spec_.chunk_id);
  if (ask.every_row) reply->AddTensor(ids, spec_.variable_id, spec_.chunk_id);
  return Status::Ok();
}

Status TableChunk::ApplyStep(int64_t step, const std::vector<Tensor>& sums, int k,
                             ShardCounters* counters) {
  const bool both = k > 0 && sums.size() == 2;
  return ApplyStep(step, both ? sums[0] : Tensor(), both ? sums[1] : Tensor(), k, counters);
}

Status TableChunk::Load(const HolderState& state) {
  const TableState* t = std::get_if<TableState>(&state);
  if (t == nullptr) return CorruptionError(Describe() + ": its saved state is a dense chunk's");
  return Restore(*t);
}

}  // namespace towerps::ps
