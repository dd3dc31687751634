#include "ps/server/chunk.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>

#include "ps/server/optimizer.h"

namespace towerps::ps {

Chunk::Chunk(const ChunkSpec& spec, const JobConfig& config, TensorAllocator allocate)
    : spec_(spec),
      config_(config),
      allocate_(std::move(allocate)),
      rule_(UpdateRule::ForMode(config)) {}

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

bool Chunk::Fits(const ChunkState& state) const {
  auto fits = [&](const Tensor& t) {
    return t.dtype() == DType::kFloat32 && t.num_elements() == spec_.num_elements;
  };
  return fits(state.values) &&
         static_cast<int>(state.slots.size()) == OptimizerSlots(config_.optimizer.kind) &&
         std::all_of(state.slots.begin(), state.slots.end(), fits);
}

void Chunk::Restore(const ChunkState& state) {
  // A state with no version (a primary not yet initialised by the chief) has no values.
  values_ = state.version == kNoVersion ? Tensor() : CopyOf(state.values);
  slots_.clear();
  for (const Tensor& s : state.slots) slots_.push_back(s.Clone());
  version_ = state.version;
  updates_ = state.updates;
  RuleState rule{state.worker_clocks, {}};
  for (const auto& [rank, g] : state.pending) {
    // An empty tensor marks a gradient refused as non-finite (ChunkState::pending).
    rule.pending[rank] = Contribution{
        .worker = rank, .base_version = version_, .gradient = g, .refused = g.num_elements() == 0};
  }
  rule_->Load(rule, version_);
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
  static_cast<HolderStateHead&>(s) = {spec_.variable_id, spec_.chunk_id, version_, updates_};
  if (initialized()) {
    s.values = values_.Clone();
    for (const Tensor& slot : slots_) s.slots.push_back(slot.Clone());
  }
  RuleState rule = rule_->Save(version_, replica);
  s.worker_clocks = std::move(rule.worker_clocks);
  for (const auto& [rank, c] : rule.pending) s.pending[rank] = c.refused ? Tensor() : c.gradient;
  if (replica && previous_version_ != kNoVersion) {
    s.previous_version = previous_version_;
    s.previous_values = previous_values_.Clone();
  }
  return s;
}

Tensor Chunk::WritableBuffer() {
  if (values_.Exclusive()) return values_;
  Tensor spare = TakeExclusive(spares_);
  return spare.defined() ? spare : NewBuffer();
}

void Chunk::Update(const float* const* grads, int k, int divisor, float lr,
                   ShardCounters& counters) {
  const UpdateTimer timer(counters.aggregation_nanos, counters.busy);
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
    ApplyUpdate(config_.UpdateOptimizer(updates_), args);
  }
  if (out.raw_data() != values_.raw_data()) {
    if (spares_.size() < 3) spares_.push_back(std::move(values_));
    values_ = std::move(out);
  }
  ++updates_;
  ++version_;
  counters.updates_applied.fetch_add(1, std::memory_order_relaxed);
}

float Chunk::ScheduledRate() const {
  return LearningRateAt(config_.optimizer, config_.schedule, config_.ScheduleStep(updates_));
}

std::string Chunk::Describe() const {
  return "variable " + std::to_string(spec_.variable_id) + " chunk " +
         std::to_string(spec_.chunk_id);
}

void Chunk::Apply(const FormedUpdate& update, ShardCounters& counters) {
  if (rule_->RetainsPreviousVersion()) {
    // Shared, not copied: the update below writes elsewhere while this handle holds the buffer.
    previous_values_ = values_;
    previous_version_ = version_;
  }
  std::vector<const float*> grads;
  for (const Contribution* c : update.gradients) grads.push_back(c->gradient.f32());
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
    step_hook_(version_, {sum}, k);
    grads.assign(1, sum.f32());
    if (k > 0) Update(grads.data(), 1, update.divisor, update.lr, counters);
  } else if (k > 0) {
    Update(grads.data(), k, update.divisor, update.lr, counters);
  }
  if (k == 0) ++version_;  // nothing to apply: the version still counts the update
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
  previous_values_ = values_;
  previous_version_ = version_;
  if (k > 0) {
    const float* g = sum.f32();
    Update(&g, 1, k, ScheduledRate(), *counters);
    counters->RecordStaleness(0);
  } else {
    ++version_;
  }
  rule_->Replayed(step);
  return Status::Ok();
}

Result<PushOutcome> Chunk::Push(int worker, int64_t base_version, int64_t clock,
                                const Tensor& gradient, ShardCounters* counters, bool replace) {
  return Push(Contribution{worker, base_version, clock, gradient}, counters, replace);
}

Result<PushOutcome> Chunk::Push(Contribution c, ShardCounters* counters, bool replace) {
  if (!initialized()) {
    return FailedPreconditionError(Describe() + " has no value yet: the chief must Init it first");
  }
  if (c.gradient.num_elements() != spec_.num_elements || c.gradient.dtype() != DType::kFloat32) {
    return InvalidArgumentError("gradient for " + Describe() + " has " +
                                std::to_string(c.gradient.num_elements()) + " elements, expected " +
                                std::to_string(spec_.num_elements));
  }
  return rule_->Push(std::move(c), replace, *this, *counters);
}

bool Chunk::PullReady(int64_t min_version, int64_t clock) const {
  return initialized() && rule_->PullReady(version_, min_version, clock);
}

namespace {

// A request's tensor count, or an error naming what it carries.
Status ExpectTensors(const IncomingMessage& m, size_t n, const char* what) {
  if (m.tensors().size() == n) return Status::Ok();
  return InvalidArgumentError(std::string(what) + " carries " + std::to_string(m.tensors().size()) +
                              " tensors, expected " + std::to_string(n));
}

}  // namespace

Result<bool> Chunk::Init(const IncomingMessage& request) {
  TOWERPS_RETURN_IF_ERROR(ExpectTensors(request, 1, "init"));
  return Init(request.tensors()[0]);
}

Status Chunk::ReadPull(const IncomingMessage& /*request*/, PullAsk* /*ask*/) const {
  return Status::Ok();  // a chunk's pull selects all of it
}

Result<Contribution> Chunk::ReadPush(const IncomingMessage& request, int worker,
                                     PullAsk* /*next*/) const {
  TOWERPS_RETURN_IF_ERROR(ExpectTensors(request, 1, "push"));
  auto h = request.header();
  return Contribution{worker, h.getVersion(), h.getClock(), request.tensors()[0]};
}

Status Chunk::AddPullValues(const PullAsk& ask, OutgoingMessage* reply) const {
  const Tensor* values = &values_;
  int64_t version = version_;
  if (ask.exact) {
    version = ask.version;
    values = ValuesAt(version);
    if (values == nullptr) {
      return FailedPreconditionError("version " + std::to_string(version) + " of " + Describe() +
                                     " is no longer held (the chunk is at version " +
                                     std::to_string(version_) +
                                     "; servers keep one version back, in sync mode)");
    }
  }
  reply->header().setVersion(version);
  // Zero copy: the chunk writes its next update elsewhere while this buffer is shared.
  reply->AddTensor(*values, spec_.variable_id, spec_.chunk_id);
  return Status::Ok();
}

Status Chunk::ApplyStep(int64_t step, const std::vector<Tensor>& sums, int k,
                        ShardCounters* counters) {
  return ApplyStep(step, k > 0 && !sums.empty() ? sums[0] : Tensor(), k, counters);
}

Status Chunk::Load(const HolderState& state) {
  const ChunkState* c = std::get_if<ChunkState>(&state);
  if (c == nullptr) return CorruptionError(Describe() + ": its saved state is a table's");
  if (c->version == kNoVersion && !initialized()) return Status::Ok();  // nothing to restore
  if (c->version != kNoVersion && !Fits(*c)) {
    return CorruptionError(Describe() +
                           ": its values or optimizer slots differ from the placement's size "
                           "or the job's --optimizer");
  }
  Restore(*c);
  return Status::Ok();
}

}  // namespace towerps::ps
