#include "ps/chunk.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "common/finite.h"
#include "ps/optimizer.h"

namespace towerps::ps {

Chunk::Chunk(const ChunkSpec& spec, const JobConfig& config, TensorAllocator allocate)
    : spec_(spec),
      config_(config),
      allocate_(std::move(allocate)),
      worker_clocks_(static_cast<size_t>(config.workers), 0) {}

Tensor Chunk::NewBuffer() const {
  return allocate_ ? allocate_({spec_.num_elements}) : Tensor::Empty({spec_.num_elements});
}

Tensor Chunk::CopyOf(const Tensor& t) const {
  Tensor copy = NewBuffer();
  std::memcpy(copy.raw_data(), t.raw_data(), copy.byte_size());
  return copy;
}

Result<bool> Chunk::Init(const Tensor& values) {
  if (values.num_elements() != spec_.num_elements || values.dtype() != DType::kFloat32) {
    return InvalidArgumentError("initial value for variable " + std::to_string(spec_.variable_id) +
                                " chunk " + std::to_string(spec_.chunk_id) + " has " +
                                std::to_string(values.num_elements()) + " elements, expected " +
                                std::to_string(spec_.num_elements));
  }
  if (initialized()) return false;
  values_ = CopyOf(values);
  slots_.clear();
  for (int s = 0; s < OptimizerSlots(config_.optimizer.kind); ++s) {
    Tensor slot = Tensor::Empty({spec_.num_elements});
    std::fill_n(slot.f32(), spec_.num_elements, OptimizerSlotInitialValue(config_.optimizer));
    slots_.push_back(std::move(slot));
  }
  version_ = 0;
  updates_ = 0;
  return true;
}

void Chunk::Restore(const ChunkState& state) {
  values_ = CopyOf(state.values);
  slots_.clear();
  for (const Tensor& s : state.slots) slots_.push_back(s.Clone());
  version_ = state.version;
  updates_ = state.updates;
  worker_clocks_ = state.worker_clocks;
  worker_clocks_.resize(static_cast<size_t>(config_.workers), 0);
  pending_.clear();
  softsync_pending_.clear();
  if (!state.pending.empty()) pending_[version_] = state.pending;
  previous_version_ = state.previous_version;
  previous_values_ = previous_version_ == kNoVersion ? Tensor() : CopyOf(state.previous_values);
}

const Tensor* Chunk::ValuesAt(int64_t version) const {
  if (!initialized()) return nullptr;
  if (version == version_) return &values_;
  if (version == previous_version_ && version != kNoVersion) return &previous_values_;
  return nullptr;
}

ChunkState Chunk::Snapshot(bool replica) const {
  ChunkState s;
  s.variable_id = spec_.variable_id;
  s.chunk_id = spec_.chunk_id;
  s.version = version_;
  s.updates = updates_;
  if (initialized()) {
    s.values = values_.Clone();
    for (const Tensor& slot : slots_) s.slots.push_back(slot.Clone());
  }
  s.worker_clocks = worker_clocks_;
  if (replica && previous_version_ != kNoVersion) {
    s.previous_version = previous_version_;
    s.previous_values = previous_values_.Clone();
  }
  if (auto it = pending_.find(version_); replica && it != pending_.end()) {
    // Gradients are never written after they arrive: sharing them is a copy.
    s.pending = it->second;
  }
  return s;
}

Tensor Chunk::WritableBuffer() {
  if (values_.Exclusive()) return values_;
  Tensor spare = TakeExclusive(spares_);
  return spare.defined() ? spare : NewBuffer();
}

void Chunk::Update(const float* const* grads, int k, int divisor, float lr,
                   ShardCounters* counters) {
  const auto start = std::chrono::steady_clock::now();
  Tensor out = WritableBuffer();
  UpdateArgs args;
  args.grads = grads;
  args.k = k;
  args.scale = 1.0f / static_cast<float>(divisor);
  args.w_in = values_.f32();
  args.w_out = out.f32();
  args.slot0 = slots_.size() > 0 ? slots_[0].f32() : nullptr;
  args.slot1 = slots_.size() > 1 ? slots_[1].f32() : nullptr;
  args.n = spec_.num_elements;
  args.lr = lr;
  args.t = updates_ + 1;
  if (spec_.kind == VariableKind::kMovingAverage) {
    ApplyMovingAverage(spec_.decay, args);
  } else {
    ApplyUpdate(config_.optimizer, args);
  }
  if (out.raw_data() != values_.raw_data()) {
    if (spares_.size() < 3) spares_.push_back(std::move(values_));
    values_ = std::move(out);
  }
  ++updates_;
  ++version_;
  counters->updates_applied.fetch_add(1, std::memory_order_relaxed);
  counters->aggregation_nanos.fetch_add(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count()),
      std::memory_order_relaxed);
}

void Chunk::CompleteStep(int64_t step, float lr, ShardCounters* counters) {
  // Shared, not copied: the update below writes elsewhere while this handle holds the buffer.
  previous_values_ = values_;
  previous_version_ = version_;
  std::vector<const float*> grads;  // std::map iterates in worker-rank order
  for (const auto& [rank, g] : pending_[step]) {
    if (g.num_elements() > 0) grads.push_back(g.f32());
  }
  const int k = static_cast<int>(grads.size());
  if (step_hook_) {
    // The rank-ordered sum, as the fused update forms it element by element.
    Tensor sum = NewBuffer();
    float* out = sum.f32();
    for (int64_t i = 0; k > 0 && i < spec_.num_elements; ++i) {
      float g = grads[0][i];
      for (int j = 1; j < k; ++j) g += grads[static_cast<size_t>(j)][i];
      out[i] = g;
    }
    step_hook_(step, sum, k);
    grads.assign(1, sum.f32());
    if (k > 0) Update(grads.data(), 1, k, lr, counters);
  } else if (k > 0) {
    Update(grads.data(), k, k, lr, counters);
  }
  if (k > 0) {
    counters->RecordStaleness(0);
  } else {
    ++version_;  // every gradient of the step was refused: the step passes with no update
  }
  pending_.erase(step);  // only now: it holds the gradients (often the only handle on them)
}

Status Chunk::ApplyStep(int64_t step, const Tensor& sum, int k, ShardCounters* counters) {
  if (!initialized() || step != version_) {
    return FailedPreconditionError("step " + std::to_string(step) +
                                   " replayed on a chunk at version " + std::to_string(version_));
  }
  if (k < 0 || k > config_.workers ||
      (k > 0 && (sum.num_elements() != spec_.num_elements || sum.dtype() != DType::kFloat32))) {
    return InvalidArgumentError("a step's sum of " + std::to_string(k) + " gradients with " +
                                std::to_string(sum.num_elements()) + " elements");
  }
  const float lr = LearningRateAt(config_.optimizer, config_.schedule, updates_);
  previous_values_ = values_;
  previous_version_ = version_;
  if (k > 0) {
    const float* g = sum.f32();
    Update(&g, 1, k, lr, counters);
    counters->RecordStaleness(0);
  } else {
    ++version_;
  }
  pending_.erase(step);
  return Status::Ok();
}

Result<PushOutcome> Chunk::Push(int worker, int64_t base_version, int64_t clock,
                                const Tensor& gradient, ShardCounters* counters, bool replace) {
  const std::string where =
      "variable " + std::to_string(spec_.variable_id) + " chunk " + std::to_string(spec_.chunk_id);
  if (!initialized()) {
    return FailedPreconditionError(where + " has no value yet: the chief must Init it first");
  }
  if (gradient.num_elements() != spec_.num_elements || gradient.dtype() != DType::kFloat32) {
    return InvalidArgumentError("gradient for " + where + " has " +
                                std::to_string(gradient.num_elements()) + " elements, expected " +
                                std::to_string(spec_.num_elements));
  }
  if (worker < 0 || worker >= config_.workers) {
    return InvalidArgumentError("worker rank " + std::to_string(worker) + " is outside 0.." +
                                std::to_string(config_.workers - 1));
  }
  counters->gradients_received.fetch_add(1, std::memory_order_relaxed);
  PushOutcome out;
  const float lr = LearningRateAt(config_.optimizer, config_.schedule, updates_);
  // Checked before anything is kept or applied; a stale sync gradient is dropped unread.
  auto refuse_if_nonfinite = [&]() {
    const int64_t bad = FindNonFinite(gradient.f32(), gradient.num_elements());
    if (bad < 0) return false;
    counters->nonfinite_rejected.fetch_add(1, std::memory_order_relaxed);
    out.kind = PushOutcome::Kind::kRejected;
    out.rejection = "worker " + std::to_string(worker) + "'s gradient for " + where + " has " +
                    DescribeValue(gradient.f32()[bad]) + " at element " + std::to_string(bad) +
                    ": refused, not applied (that worker's training diverged)";
    return true;
  };

  if (config_.mode == UpdateMode::kSync) {
    if (base_version < version_) {
      counters->stale_dropped.fetch_add(1, std::memory_order_relaxed);
      out.kind = PushOutcome::Kind::kDropped;
      out.version = version_;
      return out;
    }
    if (base_version > version_) {
      return InvalidArgumentError("gradient for step " + std::to_string(base_version) + " of " +
                                  where + ", which is only at version " + std::to_string(version_) +
                                  ": pull before pushing");
    }
    auto& bucket = pending_[base_version];
    if (auto held = bucket.find(worker); held != bucket.end()) {
      // A restarted worker recomputing the step its predecessor did not finish: the same bits
      // are a duplicate; anything else means the recomputation differs from the original.
      const bool same =
          held->second.num_elements() == 0
              ? FindNonFinite(gradient.f32(), gradient.num_elements()) >= 0
              : std::memcmp(held->second.raw_data(), gradient.raw_data(),
                            static_cast<size_t>(gradient.num_elements()) * sizeof(float)) == 0;
      if (!same && replace) {
        const bool refused = refuse_if_nonfinite();
        held->second = refused ? Tensor() : gradient;
        out.version = version_;
        return out;  // pending (or rejected), as the one it replaces
      }
      if (!same) {
        return InvalidArgumentError(
            "worker " + std::to_string(worker) + " pushed a gradient for step " +
            std::to_string(base_version) + " of " + where +
            " that differs from the one it pushed before: a restarted worker must recompute "
            "its step bit for bit (same data, parameters and dropout masks)");
      }
      counters->stale_dropped.fetch_add(1, std::memory_order_relaxed);  // dropped, as stale ones
      out.kind = PushOutcome::Kind::kDuplicate;
      out.version = version_;
      return out;
    }
    const bool refused = refuse_if_nonfinite();
    bucket.emplace(worker, refused ? Tensor() : gradient);
    if (static_cast<int>(bucket.size()) >= config_.EffectiveReplicas()) {
      CompleteStep(base_version, lr, counters);
      if (!refused) out.kind = PushOutcome::Kind::kApplied;
    }
    out.version = version_;
    return out;  // pending, applied or rejected
  }

  // async and ssp. A worker's iterations reach a chunk in order, so an iteration below its clock
  // here was applied already: a restarted worker redoing the iteration its predecessor did not
  // finish everywhere. Dropped, so that no iteration is applied twice.
  if (clock < worker_clocks_[static_cast<size_t>(worker)]) {
    counters->stale_dropped.fetch_add(1, std::memory_order_relaxed);
    out.kind = PushOutcome::Kind::kDuplicate;
    out.version = version_;
    return out;
  }
  const int64_t staleness = version_ - base_version;
  if (staleness < 0) {
    return InvalidArgumentError("gradient computed from version " + std::to_string(base_version) +
                                " of " + where + ", which is only at version " +
                                std::to_string(version_));
  }
  if (config_.mode == UpdateMode::kSoftsync) {
    for (const SoftsyncGradient& p : softsync_pending_) {
      if (p.worker == worker && p.clock == clock) {  // a restarted worker's repeat, still pending
        counters->stale_dropped.fetch_add(1, std::memory_order_relaxed);
        out.kind = PushOutcome::Kind::kDuplicate;
        out.version = version_;
        return out;
      }
    }
    const bool refused = refuse_if_nonfinite();
    softsync_pending_.push_back({worker, clock, base_version, refused ? Tensor() : gradient});
    if (static_cast<int>(softsync_pending_.size()) >= config_.SoftsyncBatch()) {
      out.staleness = staleness;
      CompleteSoftsyncUpdate(lr, counters);
      if (!refused) out.kind = PushOutcome::Kind::kApplied;
    }
    out.version = version_;
    return out;  // pending, applied or rejected
  }
  if (refuse_if_nonfinite()) {
    // The push still counts, with no update: the version goes on counting every worker's
    // pushes (the chief waits for all of them at the end), and the worker's clock moves on so
    // that SSP does not hold the others back.
    ++version_;
    int64_t& c = worker_clocks_[static_cast<size_t>(worker)];
    c = std::max(c, clock + 1);
    out.version = version_;
    return out;
  }
  const float effective_lr =
      config_.staleness_aware_lr ? lr / static_cast<float>(std::max<int64_t>(1, staleness)) : lr;
  const float* g = gradient.f32();
  Update(&g, 1, 1, effective_lr, counters);
  counters->RecordStaleness(staleness);
  int64_t& c = worker_clocks_[static_cast<size_t>(worker)];
  c = std::max(c, clock + 1);
  out.kind = PushOutcome::Kind::kApplied;
  out.staleness = staleness;
  out.version = version_;
  return out;
}

void Chunk::CompleteSoftsyncUpdate(float lr, ShardCounters* counters) {
  // Worker-rank order (then iteration: a fast worker may have two in one update), so the sum is
  // formed as sync forms it: n = 1 with one gradient per worker is sync's update, bit for bit.
  std::sort(softsync_pending_.begin(), softsync_pending_.end(),
            [](const SoftsyncGradient& a, const SoftsyncGradient& b) {
              return std::tie(a.worker, a.clock) < std::tie(b.worker, b.clock);
            });
  std::vector<const float*> grads;
  int64_t staleness_sum = 0;
  for (const SoftsyncGradient& p : softsync_pending_) {
    int64_t& c = worker_clocks_[static_cast<size_t>(p.worker)];
    c = std::max(c, p.clock + 1);
    if (p.gradient.num_elements() == 0) continue;  // refused as non-finite
    grads.push_back(p.gradient.f32());
    const int64_t staleness = version_ - p.base_version;
    staleness_sum += staleness;
    counters->RecordStaleness(staleness);
  }
  const int k = static_cast<int>(grads.size());
  if (k > 0) {
    // Zhang et al.'s modulation: the rate over the mean staleness of the update's gradients.
    const double mean = static_cast<double>(staleness_sum) / k;
    const float effective_lr =
        config_.staleness_aware_lr ? static_cast<float>(lr / std::max(1.0, mean)) : lr;
    Update(grads.data(), k, k, effective_lr, counters);
  } else {
    ++version_;  // every gradient was refused: the version still counts the update
  }
  softsync_pending_.clear();  // only now: it holds the gradients
}

bool Chunk::PullReady(int64_t min_version, int64_t clock) const {
  if (!initialized() || version_ < min_version) return false;
  if (config_.mode != UpdateMode::kSsp) return true;
  const int64_t slowest = *std::min_element(worker_clocks_.begin(), worker_clocks_.end());
  return slowest >= clock - config_.staleness;
}

}  // namespace towerps::ps
