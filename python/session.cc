#include "python/session.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "job/table_policy.h"
#include "job/variable.h"
#include "job/version.h"
#include "worker/data/batch.h"
#include "worker/train/chief.h"
#include "worker/train/join_job.h"
#include "worker/train/npz_export.h"

namespace towerps::python {
namespace {

using Clock = std::chrono::steady_clock;

// A script's loop decides how long it trains: no version is the last.
constexpr int64_t kNoLastStep = int64_t{1} << 60;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

Status CheckParameters(const std::vector<ParameterSpec>& parameters,
                       const std::vector<TableSpec>& tables, const ps::TablePolicies& policies) {
  if (parameters.empty() && tables.empty()) {
    return InvalidArgumentError("the model has no parameters to train");
  }
  std::vector<std::string> names;
  for (const ParameterSpec& p : parameters) names.push_back(p.name);
  for (const TableSpec& t : tables) {
    names.push_back(t.name);
    if (t.rows < 0 || t.dim <= 0 || !(t.init_scale >= 0)) {
      return InvalidArgumentError("table '" + t.name + "' has " + std::to_string(t.rows) +
                                  " rows of " + std::to_string(t.dim) +
                                  " floats: rows must be >= 0 (0: unbounded), dim positive");
    }
    ps::VariableSpec declared = ps::TableVariable(t.name, t.rows, t.dim, t.init_scale);
    declared.policy = t.policy;
    declared.segments = t.segments;
    TOWERPS_RETURN_IF_ERROR(ps::ValidateVariableKind(declared));
    TOWERPS_RETURN_IF_ERROR(ps::CheckTablePolicy(policies, declared));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].empty()) {
      return InvalidArgumentError("parameter " + std::to_string(i) + " has no name");
    }
    for (size_t j = 0; j < i; ++j) {
      if (names[j] == names[i]) {
        return InvalidArgumentError("parameter '" + names[i] + "' is declared twice");
      }
    }
  }
  for (const ParameterSpec& p : parameters) {
    for (int64_t d : p.shape) {
      if (d <= 0) {
        return InvalidArgumentError("parameter '" + p.name + "' has shape " +
                                    ShapeToString(p.shape) + ": every dimension must be positive");
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Session::Session(SessionOptions options, std::vector<ParameterSpec> parameters,
                 std::vector<TableSpec> tables)
    : o_(std::move(options)),
      parameters_(std::move(parameters)),
      tables_(std::move(tables), static_cast<uint32_t>(parameters_.size())) {
  for (const ParameterSpec& p : parameters_) {
    int64_t n = 1;
    for (int64_t d : p.shape) n *= d;
    elements_.push_back(n);
  }
  gradients_.resize(parameters_.size());
  pushed_.assign(parameters_.size(), 0);
}

Session::~Session() {
  // Pushes in flight borrow gradients_ and the tables' gradients: let them finish first.
  if (exchange_) exchange_->DrainPushes();
}

Result<std::unique_ptr<Session>> Session::Start(SessionOptions options,
                                                std::vector<ParameterSpec> parameters,
                                                const std::vector<const float*>& initial,
                                                std::vector<TableSpec> tables) {
  TOWERPS_RETURN_IF_ERROR(CheckParameters(parameters, tables, options.job.table_policies));
  if (initial.size() != parameters.size()) {
    return InvalidArgumentError("got " + std::to_string(initial.size()) + " initial values for " +
                                std::to_string(parameters.size()) + " parameters");
  }
  const SessionOptions& o = options;
  TOWERPS_ASSIGN_OR_RETURN(worker::StragglerPlan stragglers,
                           worker::StragglerPlan::Parse(o.worker.straggler, o.worker.straggler_dist,
                                                        o.worker.slow_workers, o.job.workers));
  std::unique_ptr<Session> s(
      new Session(std::move(options), std::move(parameters), std::move(tables)));
  s->stragglers_ = std::move(stragglers);
  if (s->o_.rank == 0) {
    // The servers' optimizer, which a script that passes only --optimizer may not expect.
    TOWERPS_LOG(kInfo) << "the servers train with " << s->o_.job.DescribeOptimizer();
  }
  TOWERPS_RETURN_IF_ERROR(s->Connect(initial));
  return s;
}

Status Session::Connect(const std::vector<const float*>& initial) {
  std::vector<std::string> names;
  for (const ParameterSpec& p : parameters_) names.push_back(p.name);
  tables_.AddNames(&names);
  divergence_.emplace(o_.worker.on_nonfinite, o_.rank, std::move(names));
  TOWERPS_ASSIGN_OR_RETURN(client_, worker::ConnectToServers({.rank = o_.rank,
                                                              .endpoints = o_.ps_endpoints,
                                                              .job = o_.job,
                                                              .rpc_timeout = o_.worker.rpc_timeout,
                                                              .security = o_.security,
                                                              .path = o_.transport_path}));
  const int n = num_parameters();
  exchange_.emplace(*client_, o_.job, n, tables_.Variables(), *divergence_, o_.stop);
  exchange_->set_bucket_bytes(o_.worker.bucket_bytes);
  exchange_->set_shared_gradients(true);  // p.grad, lent: the script could still write it
  tables_.Attach(
      *client_, *exchange_,
      [this](Status failed, const std::function<Status()>& again, const std::string& how) {
        return RetryAfterRestart(
            std::move(failed),
            [&] {
              TOWERPS_RETURN_IF_ERROR(Register().status());
              return again();
            },
            how);
      });
  for (const ParameterSpec& p : parameters_) {
    gradient_buffers_.emplace_back(client_.get(), p.shape, o_.max_gradient_buffers);
  }
  values_ = initial;
  restarts_seen_ = client_->server_restarts();
  TOWERPS_ASSIGN_OR_RETURN(const int64_t restored, Register());
  TOWERPS_ASSIGN_OR_RETURN(const worker::JoinPoint start,
                           worker::JoinJob(*client_, o_.job, n, tables_.Variables(), restored,
                                           o_.worker.join_timeout, o_.stop));
  iter_ = start_iter_ = start.iter;
  start_exact_ = start.exact;
  exchange_->Begin(start.version, start.iter, kNoLastStep, start.exact, worker::Batch{});
  if (!o_.worker.ready_file.empty()) {
    TOWERPS_RETURN_IF_ERROR(worker::WriteReadyFile(o_.worker.ready_file));
  }
  metrics_.Open(o_.worker.metrics_out, o_.worker.logdir, o_.rank);
  began_ = logged_since_ = Clock::now();
  return Status::Ok();
}

std::vector<ps::VariableSpec> Session::Variables() const {
  std::vector<ps::VariableSpec> variables;
  for (const ParameterSpec& p : parameters_)
    variables.push_back({.name = p.name, .shape = p.shape});
  tables_.AddVariables(&variables);
  return variables;
}

Result<int64_t> Session::Register() {
  const std::vector<ps::VariableSpec> variables = Variables();
  return worker::RegisterModel(
      *client_, variables, ps::VariableListHash(variables), o_.rank, num_parameters(),
      [&](int v) {
        Tensor value = Tensor::Empty(parameters_[static_cast<size_t>(v)].shape);
        std::memcpy(value.f32(), values_[static_cast<size_t>(v)], value.byte_size());
        return value;
      },
      o_.stop);
}

Status Session::RetryAfterRestart(Status failed, const std::function<Status()>& recover,
                                  const std::string& how) {
  for (int rejoins = 0; !failed.ok(); ++rejoins) {
    const uint64_t restarts = client_->server_restarts();
    if (restarts == restarts_seen_ || rejoins >= 100 || (o_.stop && o_.stop->load())) break;
    restarts_seen_ = restarts;
    TOWERPS_LOG(kWarning) << failed.message() << "; " << how;
    failed = recover();
  }
  return failed;
}

Status Session::RejoinAndRetry(Status failed, const std::function<Status()>& again) {
  return RetryAfterRestart(failed, [&] {
    TOWERPS_RETURN_IF_ERROR(Rejoin());
    return again();
  });
}

Status Session::Rejoin() {
  // The pushes lend the held gradients: let them finish before they are sent again. The next
  // step's rows pulled ahead are pulled again.
  exchange_->DrainPushes();
  exchange_->tables().DropAhead();
  TOWERPS_ASSIGN_OR_RETURN(const int64_t restored, Register());
  TOWERPS_ASSIGN_OR_RETURN(const worker::JoinPoint at,
                           worker::JoinJob(*client_, o_.job, num_parameters(), tables_.Variables(),
                                           restored, o_.worker.join_timeout, o_.stop));
  const int64_t held = iter_ - 1;  // the step of the held gradients, when holding_
  if (at.iter < (holding_ ? held : iter_)) {
    return FailedPreconditionError(
        "the servers now stand at step " + std::to_string(at.iter) +
        ", before this script's step " + std::to_string(holding_ ? held : iter_) +
        " (a server came back from an older checkpoint): a script cannot redo the steps it has "
        "finished, so the job must be restarted, from the checkpoints");
  }
  exchange_->Begin(at.version, at.iter, kNoLastStep, at.exact, worker::Batch{});
  if (!holding_ || at.iter != held) return Status::Ok();  // the step is complete everywhere
  // Incomplete somewhere: the values it was computed from again (this worker has them), then
  // its gradients again, and the next values.
  TOWERPS_RETURN_IF_ERROR(exchange_->AwaitValues([](int, const ps::PulledVariable&) {}));
  for (size_t i = 0; i < gradients_.size(); ++i) {
    exchange_->Push(static_cast<int>(i), gradients_[i], held);
  }
  TOWERPS_RETURN_IF_ERROR(tables_.PushAll(held));
  exchange_->PullNext(iter_);
  return Status::Ok();
}

Status Session::AwaitValues(const std::vector<float*>& dst) {
  if (dst.size() != parameters_.size()) {
    return InvalidArgumentError("AwaitValues got " + std::to_string(dst.size()) + " buffers for " +
                                std::to_string(parameters_.size()) + " parameters");
  }
  const auto start = Clock::now();
  // With replicas, a sync step's table partitions must be known complete (their backups hold
  // it) before its gradients go: a fed table pulls its rows only in the next forward, and a
  // failover before then would lose the step. One empty pull per table says so.
  const bool confirm_tables = !tables_.empty() && o_.job.ps_replicas > 1 &&
                              o_.job.mode == ps::UpdateMode::kSync && holding_;
  const auto await = [&]() -> Status {
    TOWERPS_RETURN_IF_ERROR(exchange_->AwaitValues(
        [&](int v, const ps::PulledVariable& p) { p.CopyTo(dst[static_cast<size_t>(v)]); }));
    if (!confirm_tables) return Status::Ok();
    int64_t lowest = INT64_MAX, highest = ps::kNoVersion, clock = -1;
    return exchange_->tables().Probe(iter_, /*exact=*/false, &lowest, &highest, &clock);
  };
  Status s = RejoinAndRetry(await(), await);
  wait_seconds_ += Seconds(Clock::now() - start);
  TOWERPS_RETURN_IF_ERROR(s);
  values_.assign(dst.begin(), dst.end());
  // The step's values are in: its gradients are no longer needed (the buffers are exclusive
  // again once the servers let go of them).
  if (holding_) {
    std::fill(gradients_.begin(), gradients_.end(), Tensor());
    tables_.Release();
    holding_ = false;
  }
  // Injected slow-down (experiments): before computing, so this worker's gradients are late.
  const double delay = stragglers_.DelaySeconds(o_.rank, iter_, o_.job.seed, last_compute_);
  if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
  delay_seconds_ += delay;
  computing_since_ = Clock::now();
  return Status::Ok();
}

Status Session::Push(int v, const float* gradient, int64_t elements) {
  if (v < 0 || v >= num_parameters()) {
    return InvalidArgumentError("no parameter " + std::to_string(v) + " (the model has " +
                                std::to_string(num_parameters()) + ")");
  }
  const auto i = static_cast<size_t>(v);
  const ParameterSpec& p = parameters_[i];
  if (elements != elements_[i]) {
    return InvalidArgumentError("the gradient of '" + p.name + "' has " + std::to_string(elements) +
                                " elements, its shape " + ShapeToString(p.shape) + " has " +
                                std::to_string(elements_[i]));
  }
  if (pushed_[i] != 0) {
    return InvalidArgumentError("the gradient of '" + p.name +
                                "' was pushed twice in one step (call step() after each backward)");
  }
  // Lent as it is, unless a server still reads it from an earlier step (then a copy).
  if (const Tensor* lent = gradient_buffers_[i].Lendable(gradient)) {
    Send(i, *lent);
    return Status::Ok();
  }
  // The client's buffer (the shared-memory arena's, when there is one): the push lends it.
  copied_pushes_.fetch_add(1, std::memory_order_relaxed);
  Tensor g = client_->Allocate(p.shape);
  std::memcpy(g.f32(), gradient, g.byte_size());
  Send(i, std::move(g));
  return Status::Ok();
}

float* Session::GradientBuffer(int v, bool keep_values) {
  if (v < 0 || v >= num_parameters()) return nullptr;
  return gradient_buffers_[static_cast<size_t>(v)].Current(keep_values);
}

void Session::Send(size_t i, Tensor gradient) {
  pushed_[i] = 1;
  gradients_[i] = std::move(gradient);
  exchange_->Offer(static_cast<int>(i), gradients_[i], iter_);  // through the bucket
}

Status Session::EndStep(std::optional<double> loss, std::span<const TableLookups::Ids> ahead) {
  last_compute_ = Seconds(Clock::now() - computing_since_);
  Status tables = Status::Ok();
  client_->Together([&] {  // the tables and the last bucket: one message per server
    // Bad ids ahead are refused before anything is sent.
    tables = tables_.PushAll(iter_, ahead).WithContext("the next step's lookups, given ahead");
    if (!tables.ok()) return;
    for (size_t i = 0; i < parameters_.size(); ++i) {
      if (pushed_[i] != 0) continue;
      // No gradient reached it this step (unused by this batch): it contributes zeros.
      Tensor zeros = client_->Allocate(parameters_[i].shape);
      std::memset(zeros.f32(), 0, zeros.byte_size());
      Send(i, std::move(zeros));
    }
    exchange_->FlushBucket();
  });
  TOWERPS_RETURN_IF_ERROR(tables);
  exchange_->PullNext(++iter_);
  holding_ = true;
  double staleness = 0;
  const auto await = [&] {
    Result<double> r = exchange_->AwaitPushes();
    if (r.ok()) staleness = *r;
    return r.status();
  };
  const Status pushed = RejoinAndRetry(await(), await);
  std::fill(pushed_.begin(), pushed_.end(), 0);
  TOWERPS_RETURN_IF_ERROR(pushed);
  LogTrainLine(loss, staleness);
  if (loss) last_loss_ = *loss;
  // The loss when the script gave one; the gradients' check either way.
  if (divergence_->StopsAfterStep(loss.value_or(0.0), iter_)) {
    worker::TrainingSummary s;
    divergence_->Fill(&s);
    return FailedPreconditionError(
        "diverged at step " + std::to_string(s.diverged_at_step) + " (" + s.divergence +
        "); lower the learning rate (--lr, or the script's optimizer's), or pass --on-nonfinite "
        "continue to train on and record the run as diverged");
  }
  return Status::Ok();
}

void Session::LogTrainLine(std::optional<double> loss, double staleness) {
  ++logged_steps_;
  logged_staleness_ += staleness;
  const int every = o_.worker.log_every;
  if (every <= 0 || iter_ % every != 0 || !loss) return;
  const double seconds = Seconds(Clock::now() - logged_since_);
  const double n = static_cast<double>(logged_steps_);
  const double examples = n * static_cast<double>(o_.job.batch_size);
  metrics_.Train(iter_, epoch_, *loss, seconds > 0 ? examples / seconds : 0, logged_staleness_ / n,
                 seconds / n, (wait_seconds_ - logged_wait_) / n,
                 (delay_seconds_ - logged_delay_) / n);
  logged_steps_ = 0;
  logged_staleness_ = 0;
  logged_wait_ = wait_seconds_;
  logged_delay_ = delay_seconds_;
  logged_since_ = Clock::now();
}

void Session::LogEval(const FinalMetrics& m) {
  metrics_.Eval(iter_, epoch_, {.mean_loss = m.test_loss, .accuracy = m.test_accuracy});
}

void Session::LogScalar(const std::string& tag, double value) {
  metrics_.Scalar(iter_, epoch_, tag, value);
}

Status Session::PullFinal(const std::vector<float*>& dst) {
  if (dst.size() != parameters_.size()) {
    return InvalidArgumentError("PullFinal got " + std::to_string(dst.size()) + " buffers for " +
                                std::to_string(parameters_.size()) + " parameters");
  }
  if (worker::PullPolicy::For(o_.job.mode).LastPullIsFinal()) {
    // The last EndStep's values are the final ones: every worker's last step is in them. (No
    // request, so a worker that ends after the chief stopped the servers still ends cleanly.)
    final_min_ = final_max_ = iter_;
    return Status::Ok();
  }
  // Async, SSP and softsync chunks apply each worker's iterations once; the version counts them
  // as the mode does (JobConfig::FinalVersion).
  return exchange_->PullFinal(
      [&](int v, const ps::PulledVariable& p) { p.CopyTo(dst[static_cast<size_t>(v)]); },
      o_.job.FinalVersion(iter_), &final_min_, &final_max_);
}

Result<std::string> Session::Finish(const FinalMetrics& metrics,
                                    std::vector<worker::NpzMember> own) {
  worker::TrainingSummary s;
  s.train_seconds = Seconds(Clock::now() - began_);
  s.steps = iter_;  // sync: the job's steps; else this worker's iterations
  s.epochs = metrics.epochs;
  s.wait_seconds = wait_seconds_;
  s.injected_delay_seconds = delay_seconds_;
  // The script's own time: forward, backward, data, evaluation (its loop is not ours to split).
  s.compute_seconds = std::max(0.0, s.train_seconds - wait_seconds_ - delay_seconds_);
  s.final_train_loss = metrics.final_train_loss >= 0 ? metrics.final_train_loss : last_loss_;
  divergence_->Fill(&s);
  Leave();
  if (o_.rank != 0) return std::string();
  s.final_version_min = final_min_;
  s.final_version_max = final_max_;
  TOWERPS_RETURN_IF_ERROR(worker::GatherServerStats(*client_, o_.stop, &s));
  // Not measured (-1, finish()'s default): null in the summary, not a number that reads as one.
  constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();
  s.test_accuracy = metrics.test_accuracy == -1 ? kNotMeasured : metrics.test_accuracy;
  s.test_loss = metrics.test_loss == -1 ? kNotMeasured : metrics.test_loss;
  if (metrics.test_accuracy >= 0) LogEval(metrics);
  s.measures = metrics.measures;
  for (const auto& [name, value] : metrics.measures) {
    if (name == "test_auc") s.test_auc = value;
    LogScalar("eval/" + name, value);
  }
  if (start_iter_ > 0 && s.server_training_seconds > s.train_seconds) {
    // A restarted chief (or one resuming a job): the job's training time as its servers saw
    // it, and every step's examples over it, not only this process's.
    s.train_seconds = s.server_training_seconds;
    s.examples_per_sec = worker::JobExamplesPerSec(o_.job, iter_, s.train_seconds);
  } else {
    s.examples_per_sec = worker::JobExamplesPerSec(o_.job, iter_ - start_iter_, s.train_seconds);
  }
  const std::string json = worker::SummaryJson(
      s, o_.job, o_.rank,
      {.worker_args = o_.worker.ToArgs(), .transport = TransportPathName(o_.transport_path)});
  if (!o_.worker.summary_out.empty()) {
    std::ofstream out(o_.worker.summary_out);
    out << json << "\n";
    if (!out) {
      return IoError("cannot write --summary-out " + o_.worker.summary_out + ": " +
                     std::strerror(errno));
    }
  }
  if (!o_.worker.export_npz.empty()) {
    TOWERPS_RETURN_IF_ERROR(ExportNpz(o_.worker.export_npz, std::move(own)));
  }
  if (o_.worker.shutdown_servers) {
    TOWERPS_RETURN_IF_ERROR(worker::StopServers(*client_, o_.stop));
  }
  return json;
}

void Session::Leave() {
  if (left_) return;
  left_ = true;
  if (exchange_) exchange_->DrainPushes();  // the steps it has ended are in before it leaves
  worker::LeaveServers(*client_, o_.stop, iter_);
}

Status Session::ExportNpz(const std::string& path, std::vector<worker::NpzMember> own) {
  const std::vector<ps::VariableSpec> variables = Variables();
  std::vector<Tensor> values;
  for (size_t v = 0; v < parameters_.size(); ++v) {
    values.push_back(Tensor::Empty(parameters_[v].shape));
    std::memcpy(values.back().f32(), values_[v], values.back().byte_size());
  }
  values.resize(variables.size());
  TOWERPS_ASSIGN_OR_RETURN(std::vector<ps::HeldRows> rows, tables_.Export(FinalVersion()));
  std::vector<ps::HeldRows> tables(parameters_.size());  // by variable: none for a parameter
  for (ps::HeldRows& t : rows) tables.push_back(std::move(t));
  return worker::WriteNpz(worker::NpzArrays(variables, values, tables, std::move(own)), path)
      .WithContext("--export-npz");
}

}  // namespace towerps::python
