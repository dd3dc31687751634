#include "worker/train/step_exchange.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include "worker/train/join_job.h"

namespace towerps::worker {

StepExchange::StepExchange(ps::Client& client, const ps::JobConfig& job, const Model<float>& model,
                           Divergence& divergence, const std::atomic<bool>* stop)
    : StepExchange(client, job, model.num_variables(), TableExchange(client, model, stop),
                   divergence, stop) {}

StepExchange::StepExchange(ps::Client& client, const ps::JobConfig& job, int num_variables,
                           std::vector<uint32_t> table_variables, Divergence& divergence,
                           const std::atomic<bool>* stop)
    : StepExchange(client, job, num_variables,
                   TableExchange(client, std::move(table_variables), stop), divergence, stop) {}

StepExchange::StepExchange(ps::Client& client, const ps::JobConfig& job, int num_variables,
                           TableExchange tables, Divergence& divergence,
                           const std::atomic<bool>* stop)
    : client_(client),
      policy_(PullPolicy::For(job.mode)),
      num_variables_(num_variables),
      tables_(std::move(tables)),
      divergence_(divergence),
      stop_(stop) {
  MutexLock lock(&mu_);
  versions_.assign(static_cast<size_t>(num_variables), 0);
  pushes_.resize(static_cast<size_t>(num_variables));
  pulls_.resize(static_cast<size_t>(num_variables));
  arrived_.resize(static_cast<size_t>(num_variables));
  pulled_with_push_.assign(static_cast<size_t>(num_variables), 0);
}

template <typename Reply>
Reply StepExchange::Await(Future<Reply>& reply) const {
  return AwaitUnlessStopped(reply, stop_);
}

int64_t StepExchange::last_step() const {
  MutexLock lock(&mu_);
  return last_step_;
}

void StepExchange::PullAt(int v, int64_t min_version, int64_t clock, bool exact) {
  pulls_[static_cast<size_t>(v)] = client_.Pull({.variable_id = static_cast<uint32_t>(v),
                                                 .min_version = min_version,
                                                 .clock = clock,
                                                 .exact = exact});
}

void StepExchange::Begin(int64_t version, int64_t iter, int64_t last_step, bool exact,
                         const Batch& batch) {
  {
    MutexLock lock(&bucket_mu_);  // a rejoin: what the broken step held is computed again
    bucket_.clear();
    bucket_held_bytes_ = 0;
  }
  {
    MutexLock lock(&mu_);
    last_step_ = last_step;
    replace_pending_ = policy_.ReplacesPending(exact);
    std::fill(versions_.begin(), versions_.end(), version);
    std::fill(pulled_with_push_.begin(), pulled_with_push_.end(), 0);
    arrived_.assign(arrived_.size(), std::nullopt);
    table_version_ = version;
    table_rows_came_ = false;
    for (int v = 0; v < num_variables_; ++v) PullAt(v, version, iter, exact);
  }
  tables_.Prepare(batch);
  tables_.Pull(version, iter, exact);
}

bool StepExchange::RanLastIteration(int64_t iter) const {
  MutexLock lock(&mu_);
  return policy_.RanLast(iter, last_step_);
}

StepExchange::ValueSink StepExchange::IntoTowers(TowerGroup& towers) {
  return [&towers](int v, const ps::PulledVariable& p) {
    for (int t = 0; t < towers.size(); ++t) p.CopyTo(towers.model(t).value(v).data());
  };
}

StepExchange::Arrived StepExchange::Take(int v, Result<ps::PulledVariable> r,
                                         const ValueSink& sink) {
  if (!r.ok()) return {.status = r.status()};
  sink(v, *r);
  if (profile_ != nullptr) {
    profile_->Mark(v, StepProfile::Event::kArrived, r->answered);
    profile_->Mark(v, StepProfile::Event::kLoaded);
  }
  return {.version = r->version, .max_version = r->max_version};
}

Status StepExchange::Load(std::vector<PullFuture> pulls,
                          std::vector<std::optional<Arrived>> arrived, const ValueSink& sink,
                          int64_t* max_version) {
  std::vector<int64_t> versions(pulls.size());
  for (size_t v = 0; v < pulls.size(); ++v) {
    const Arrived a = v < arrived.size() && arrived[v]
                          ? std::move(*arrived[v])
                          : Take(static_cast<int>(v), Await(pulls[v]), sink);
    TOWERPS_RETURN_IF_ERROR(a.status);
    versions[v] = a.version;
    if (max_version) *max_version = std::max(*max_version, a.max_version);
  }
  MutexLock lock(&mu_);
  versions_ = std::move(versions);
  return Status::Ok();
}

void StepExchange::LoadArrived(TowerGroup& towers) {
  std::vector<std::pair<size_t, PullFuture>> ready;
  {
    MutexLock lock(&mu_);
    for (size_t v = pulls_.size(); v-- > 0;) {  // the last layers' first, as backward pushed
      PullFuture& f = pulls_[v];
      if (f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
        ready.emplace_back(v, std::move(f));
      }
    }
  }
  const ValueSink sink = IntoTowers(towers);
  std::vector<std::pair<size_t, Arrived>> taken;
  for (auto& [v, f] : ready) taken.emplace_back(v, Take(static_cast<int>(v), f.get(), sink));
  MutexLock lock(&mu_);
  for (auto& [v, a] : taken) arrived_[v] = std::move(a);
}

Status StepExchange::AwaitValues(const ValueSink& sink) {
  std::vector<PullFuture> pulls;
  std::vector<std::optional<Arrived>> arrived;
  {
    MutexLock lock(&mu_);
    pulls = std::exchange(pulls_, std::vector<PullFuture>(static_cast<size_t>(num_variables_)));
    arrived = std::exchange(
        arrived_, std::vector<std::optional<Arrived>>(static_cast<size_t>(num_variables_)));
  }
  return Load(std::move(pulls), std::move(arrived), sink, nullptr);
}

Status StepExchange::AwaitValues(TowerGroup& towers) {
  TOWERPS_RETURN_IF_ERROR(AwaitValues(IntoTowers(towers)));
  if (tables_.empty()) return Status::Ok();
  TOWERPS_ASSIGN_OR_RETURN(const int64_t version, tables_.AwaitRows(towers));
  MutexLock lock(&mu_);
  RowsCameAt(version);
  return Status::Ok();
}

Status StepExchange::AwaitTableRows(int t, const TableExchange::RowSink& sink) {
  TOWERPS_ASSIGN_OR_RETURN(const int64_t version, tables_.AwaitRows(t, sink));
  MutexLock lock(&mu_);
  RowsCameAt(version);
  return Status::Ok();
}

void StepExchange::RowsCameAt(int64_t version) {
  table_version_ =
      std::exchange(table_rows_came_, true) ? std::min(table_version_, version) : version;
}

int64_t StepExchange::Progress(int64_t iter) const {
  MutexLock lock(&mu_);
  int64_t lowest = tables_.empty() ? INT64_MAX : table_version_;
  for (int64_t v : versions_) lowest = std::min(lowest, v);
  return policy_.Progress(iter, lowest);
}

void StepExchange::Push(int v, const Tensor& average, int64_t iter) {
  if (!divergence_.CheckGradient(v, average)) return;  // this worker stops on it
  const auto i = static_cast<size_t>(v);
  ps::PushRequest push{.variable_id = static_cast<uint32_t>(v),
                       .clock = iter,
                       .gradient = average,
                       .finite_check = divergence_.GradientWasNonFinite(v) || shared_gradients_
                                           ? ps::PushRequest::FiniteCheck::kServer
                                           : ps::PushRequest::FiniteCheck::kCaller};
  int64_t last_step;
  {
    MutexLock lock(&mu_);
    push.version = versions_[i];
    push.replace_pending = replace_pending_;
    last_step = last_step_;
  }
  // Sent outside the lock: tower threads push their variables concurrently. Marked before the
  // client has it, so that its reply cannot be stamped earlier.
  if (profile_ != nullptr) profile_->Mark(v, StepProfile::Event::kSent);
  Future<Result<ps::PushReport>> pushed;
  std::optional<Future<Result<ps::PulledVariable>>> pulled;
  if (policy_.PastLast(push.version, last_step)) {
    // This variable's chunks have done every step already: they ran ahead of the others after
    // a server came back from an older checkpoint. Nothing more is pushed to them.
    pushed = ReadyFuture(Result<ps::PushReport>(ps::PushReport{.version = push.version}));
  } else if (policy_.RanLast(iter + 1, last_step)) {
    pushed = client_.Push(push);  // no next iteration: nothing to pull
  } else {
    // The next iteration's pull goes with the push, in the same request per chunk.
    ps::Client::PushAndPull both =
        client_.PushThenPull(push, {.variable_id = push.variable_id,
                                    .min_version = policy_.NextVersion(push.version, last_step),
                                    .clock = iter + 1});
    pushed = std::move(both.push);
    pulled = std::move(both.pull);
  }
  MutexLock lock(&mu_);
  pushes_[i] = std::move(pushed);
  if (pulled) {
    pulls_[i] = std::move(*pulled);
    pulled_with_push_[i] = 1;
  }
}

void StepExchange::Offer(int v, const Tensor& average, int64_t iter) {
  if (static_cast<int64_t>(average.byte_size()) >= bucket_bytes_) return Push(v, average, iter);
  MutexLock lock(&bucket_mu_);
  bucket_.push_back({.v = v, .gradient = average, .iter = iter});
  bucket_held_bytes_ += static_cast<int64_t>(average.byte_size());
  if (bucket_held_bytes_ >= bucket_bytes_) SendBucketLocked();
}

void StepExchange::FlushBucket() {
  MutexLock lock(&bucket_mu_);
  SendBucketLocked();
}

void StepExchange::SendBucketLocked() {
  std::vector<Held> held = std::exchange(bucket_, {});
  bucket_held_bytes_ = 0;
  if (held.empty()) return;
  client_.Together([&] {
    for (const Held& h : held) Push(h.v, h.gradient, h.iter);
  });
}

void StepExchange::PushTables(const TableExchange::GradientSource& gradients, int64_t iter,
                              bool ahead) {
  int64_t version, last_step;
  bool replace;
  {
    MutexLock lock(&mu_);
    version = table_version_;
    last_step = last_step_;
    replace = replace_pending_;
  }
  client_.Together([&] {  // the held gradients and the tables' pushes: one message per server
    FlushBucket();
    // As Push does for a dense variable: no push to partitions past the last step, and no pull
    // when there is no next iteration.
    if (tables_.empty() || policy_.PastLast(version, last_step)) return;
    std::optional<std::pair<int64_t, int64_t>> pull;
    if (ahead && !policy_.RanLast(iter + 1, last_step)) {
      pull = std::make_pair(policy_.NextVersion(version, last_step), iter + 1);
    }
    // A pull that could not ride (a withheld push) goes with PullNext.
    tables_.Push(gradients, divergence_, version, iter, replace, pull);
  });
}

void StepExchange::PullNext(int64_t iter) {
  MutexLock lock(&mu_);
  if (policy_.RanLast(iter, last_step_)) return;  // no next iteration
  if (!tables_.empty()) {
    table_version_ =
        policy_.NextVersion(table_version_, last_step_);  // asked for; rows may be later
    table_rows_came_ = false;
    // What rode on the push is not sent again; a fed table's step begins either way.
    tables_.Pull(table_version_, iter, /*exact=*/false);
  }
  for (int v = 0; v < num_variables_; ++v) {
    const auto i = static_cast<size_t>(v);
    if (std::exchange(pulled_with_push_[i], 0) != 0) continue;
    PullAt(v, policy_.NextVersion(versions_[i], last_step_), iter, /*exact=*/false);
  }
}

Result<double> StepExchange::AwaitPushes() {
  std::vector<PushFuture> pushes;
  {
    MutexLock lock(&mu_);
    pushes = std::exchange(pushes_, std::vector<PushFuture>(static_cast<size_t>(num_variables_)));
    replace_pending_ = false;  // only a rejoined worker's first pushes replace
  }
  double staleness = 0;
  int pushed = 0;
  for (int v = 0; v < num_variables_; ++v) {
    PushFuture& push = pushes[static_cast<size_t>(v)];
    if (!push.valid()) continue;  // withheld: not finite, and this worker stops on it
    Result<ps::PushReport> r = Await(push);
    if (!r.ok() && divergence_.GradientWasNonFinite(v) &&
        r.status().code() == StatusCode::kInvalidArgument) {
      divergence_.CountRefused();
      continue;
    }
    TOWERPS_RETURN_IF_ERROR(r.status());
    if (profile_ != nullptr) profile_->Mark(v, StepProfile::Event::kAnswered, r->answered);
    staleness += r->mean_staleness;
    ++pushed;
  }
  TOWERPS_RETURN_IF_ERROR(tables_.AwaitPushes(divergence_, &staleness, &pushed));
  return pushed > 0 ? staleness / pushed : 0.0;
}

void StepExchange::DrainPushes() {
  std::vector<PushFuture> pushes;
  {
    MutexLock lock(&mu_);
    pushes = std::exchange(pushes_, std::vector<PushFuture>(static_cast<size_t>(num_variables_)));
  }
  for (PushFuture& push : pushes) {
    if (push.valid()) (void)Await(push);
  }
  tables_.DrainPushes();
}

Status StepExchange::PullFinal(TowerGroup& towers, int64_t version, int64_t* min_version,
                               int64_t* max_version) {
  return PullFinal(IntoTowers(towers), version, min_version, max_version);
}

Status StepExchange::PullFinal(const ValueSink& sink, int64_t version, int64_t* min_version,
                               int64_t* max_version) {
  std::vector<PullFuture> pulls(static_cast<size_t>(num_variables_));
  for (int v = 0; v < num_variables_; ++v) {
    pulls[static_cast<size_t>(v)] =
        client_.Pull({.variable_id = static_cast<uint32_t>(v), .min_version = version, .clock = 0});
  }
  TOWERPS_RETURN_IF_ERROR(Load(std::move(pulls), {}, sink, max_version));
  int64_t lowest = INT64_MAX, highest = *max_version, clock = -1;
  if (!tables_.empty()) {
    TOWERPS_RETURN_IF_ERROR(tables_.Probe(version, /*exact=*/false, &lowest, &highest, &clock));
  }
  MutexLock lock(&mu_);
  for (int64_t v : versions_) lowest = std::min(lowest, v);
  *min_version = lowest;
  *max_version = highest;
  return Status::Ok();
}

}  // namespace towerps::worker
