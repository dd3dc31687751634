#include "worker/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "ps/client.h"
#include "ps/version.h"
#include "worker/data/batcher.h"
#include "worker/straggler.h"
#include "worker/tower_group.h"
#include "worker/towers.h"
#include "worker/train/console.h"
#include "worker/train/divergence.h"
#include "worker/train/eval_schedule.h"
#include "worker/train/final_params.h"
#include "worker/train/job_data.h"
#include "worker/train/join_job.h"
#include "worker/train/local_training.h"
#include "worker/train/metrics_log.h"

namespace towerps::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The steps since the last step line: what it reports.
struct Window {
  Clock::time_point start = Clock::now();
  int64_t steps = 0;
  double loss = 0, wait = 0, delay = 0;
};

}  // namespace

class Trainer::Impl {
 public:
  explicit Impl(TrainerOptions o) : o_(std::move(o)) {}

  Status Setup() {
    const ps::JobConfig& job = o_.job;
    std::vector<std::string> warnings;
    TOWERPS_ASSIGN_OR_RETURN(const int gpu_limit, o_.worker.GpuCountLimit());
    TOWERPS_ASSIGN_OR_RETURN(
        std::vector<TowerDevice> devices,
        ParseTowers(o_.worker.towers, o_.worker.allow_soft_placement, &warnings, gpu_limit));
    for (const std::string& w : warnings) TOWERPS_LOG(kWarning) << "soft placement: " << w;
    if (job.batch_size % static_cast<int>(devices.size()) != 0) {
      return InvalidArgumentError("--batch-size=" + std::to_string(job.batch_size) +
                                  " does not split evenly over " + std::to_string(devices.size()) +
                                  " towers");
    }
    TOWERPS_ASSIGN_OR_RETURN(plan_,
                             StragglerPlan::Parse(o_.worker.straggler, o_.worker.straggler_dist,
                                                  o_.worker.slow_workers, job.workers));
    if (o_.registry == nullptr) {
      stock_registry_ = StockRegistry();
      o_.registry = &stock_registry_;
    }
    TOWERPS_ASSIGN_OR_RETURN(const ModelBuilder builder, o_.registry->DescribeModel(job.model));
    TOWERPS_ASSIGN_OR_RETURN(
        towers_, TowerGroup::Create(devices,
                                    {.intra_op_threads = o_.worker.intra_op_threads,
                                     .gpu_memory_fraction = o_.worker.gpu_memory_fraction,
                                     .allow_growth = o_.worker.allow_growth},
                                    builder, job.seed, {.peer_timeout = o_.worker.rpc_timeout}));
    Model<float>& m0 = towers_->model(0);
    num_vars_ = m0.num_variables();
    TOWERPS_ASSIGN_OR_RETURN(
        data_, LoadJobData(*o_.registry, job.dataset,
                           o_.worker.MakeDataRequest(m0.input_shape(), job.seed), job.batch_size));
    BatcherOptions train = data_.train_options;
    train.rank = o_.rank;
    train.num_workers = job.workers;
    TOWERPS_ASSIGN_OR_RETURN(batcher_, Batcher::Create(&data_.train, train));
    TOWERPS_ASSIGN_OR_RETURN(test_batcher_, Batcher::Create(&data_.test, data_.test_options));
    // What was read must fit the model, whatever the launcher could tell from the names.
    if (batcher_->example_shape() != m0.input_shape()) {
      return InvalidArgumentError(
          "model " + job.model + " expects " + ShapeToString(m0.input_shape()) + " inputs, but " +
          data_.train.name + " examples are " + ShapeToString(batcher_->example_shape()));
    }
    if (data_.train.num_classes > m0.num_classes()) {
      return InvalidArgumentError(data_.train.name + " has " +
                                  std::to_string(data_.train.num_classes) + " classes but model " +
                                  job.model + " has " + std::to_string(m0.num_classes()) +
                                  " outputs");
    }
    steps_per_epoch_ = data_.train.size() / job.workers / job.batch_size;
    if (steps_per_epoch_ < 1) {
      return InvalidArgumentError(
          data_.train.name + " has " + std::to_string(data_.train.size()) +
          " examples: too few for --workers=" + std::to_string(job.workers) +
          " x --batch-size=" + std::to_string(job.batch_size));
    }
    pushes_.resize(num_vars_);
    pulls_.resize(num_vars_);
    pulled_with_push_.assign(num_vars_, 0);
    std::vector<std::string> names;
    for (const auto& var : m0.variables()) names.push_back(var.name);
    divergence_.emplace(o_.worker.on_nonfinite, std::move(names));

    ps::ClientOptions co;
    co.servers = o_.ps_endpoints;
    co.worker_rank = o_.rank;
    co.rpc_timeout = o_.worker.rpc_timeout;
    co.job = job;
    co.transport.security = o_.security;
    co.transport.path = o_.transport_path;
    TOWERPS_ASSIGN_OR_RETURN(client_, ps::Client::Connect(co));
    // Gradients are averaged into the client's shared-memory arena: pushes lend them in place.
    towers_->SetGradientAllocator(
        [client = client_.get()](const Shape& shape) { return client->Allocate(shape); });
    TOWERPS_RETURN_IF_ERROR(RegisterWithServers());
    if (start_version_ > 0) {
      TOWERPS_LOG(kInfo) << "the servers hold version " << start_version_
                         << " (restored): continuing from there";
    }
    if (o_.worker.log_device_placement) {
      towers_->LogPlacement();
      TOWERPS_LOG(kInfo) << "placement: variable chunks:\n"
                         << client_->placement().Describe(m0.variables());
      client_->LogConnections();
    }
    TOWERPS_LOG(kInfo) << job.model << " (" << m0.num_parameters() << " parameters, " << num_vars_
                       << " variables) on " << towers_->size() << " tower(s); " << steps_per_epoch_
                       << " steps per epoch of " << job.batch_size << " examples per worker";
    return Status::Ok();
  }

  // Trains to the end. When a server restarts (from its checkpoint) under it, the calls
  // outstanding there fail; the worker then rejoins the job where the servers now stand and
  // trains on, so a server's death costs the steps since its checkpoint, not the job.
  Result<TrainingSummary> Run() {
    for (int rejoins = 0;; ++rejoins) {
      const uint64_t restarts = client_->server_restarts();
      // A failed registration (e.g. an init that reached a replica that is the backup now) is
      // retried like a failed step.
      const Status registered = rejoins == 0 ? Status::Ok() : RegisterWithServers();
      Result<TrainingSummary> r = registered.ok() ? Train() : Result<TrainingSummary>(registered);
      const bool stopping = o_.stop && o_.stop->load();
      if (r.ok() || stopping || client_->server_restarts() == restarts || rejoins >= 100) return r;
      TOWERPS_LOG(kWarning) << r.status().message()
                            << "; rejoining the job where the servers now stand";
      // The pushes share the towers' gradients: let them finish before the towers run again.
      // (Pulls hold nothing of ours; one waiting at a live server is simply abandoned.)
      for (auto& push : pushes_) {
        if (push.valid()) (void)Await(push);
      }
    }
  }

  // Declares the model to every server; start_version_ becomes the lowest version they restored
  // (kNoVersion where one restored nothing). Then the chief gives every variable its value: the
  // initial one in a fresh job, or, after a server came back without a checkpoint, the values
  // it holds now. Servers keep the first value they get, so this changes no chunk that has one.
  Status RegisterWithServers() {
    const Model<float>& m0 = towers_->model(0);
    TOWERPS_ASSIGN_OR_RETURN(start_version_,
                             Await(client_->Register(m0.variables(), m0.signature())));
    if (o_.rank != 0 || start_version_ != ps::kNoVersion) return Status::Ok();
    std::vector<std::future<Status>> inits;
    for (int v = 0; v < num_vars_; ++v) inits.push_back(client_->Init(v, m0.GetVariable(v)));
    for (auto& f : inits) TOWERPS_RETURN_IF_ERROR(Await(f));
    return Status::Ok();
  }

  Result<TrainingSummary> Train() {
    const ps::JobConfig& job = o_.job;
    const bool sync = job.mode == ps::UpdateMode::kSync;
    int64_t total = job.epochs * steps_per_epoch_;
    if (job.max_steps > 0) total = std::min(total, job.max_steps);
    last_step_ = total;
    int64_t first = std::max<int64_t>(start_version_, 0);
    bool exact = false;
    if (sync) {
      TOWERPS_ASSIGN_OR_RETURN(
          const SyncJoin join,
          JoinSyncJob(*client_, num_vars_, first, job.EffectiveReplicas() == job.workers, o_.stop));
      first = join.step;
      exact = join.exact;
      // Without exactness (a server restored from its checkpoint while another ran on), this
      // worker's first pushes may meet its own earlier ones still pending: they replace them.
      replace_pending_ = !exact;
    }
    // Async and SSP versions count every worker's updates; sync versions count steps.
    int64_t iter = first;
    if (!sync) {
      TOWERPS_ASSIGN_OR_RETURN(iter, JoinAsyncJob(*client_, num_vars_, first, o_.stop));
    }
    std::vector<int64_t> versions(num_vars_, first);
    IssuePulls(versions, /*advance=*/false, iter, exact);
    // What this worker computes at iteration `iter` is a function of it alone: its batch and
    // its dropout masks (and, in sync, the parameters at version `iter`).
    batcher_->Seek(iter);
    for (int t = 0; t < towers_->size(); ++t) towers_->model(t).SetTrainingStep(iter);
    int64_t data_epoch = batcher_->epoch();
    EvalSchedule evals(steps_per_epoch_, o_.worker.evals_per_epoch, iter);
    if (!o_.worker.ready_file.empty())
      TOWERPS_RETURN_IF_ERROR(WriteReadyFile(o_.worker.ready_file));
    ConsoleProgress console(steps_per_epoch_, total,
                            {.bar = o_.worker.progress_bar,
                             .progress_lines = o_.worker.progress_lines && o_.rank == 0});
    metrics_.Open(o_.worker.metrics_out, o_.worker.logdir, o_.rank);

    const auto start = Clock::now();
    Window window;
    double last_loss = 0, last_compute = 0;
    // The wait at the end of the last step: its pushes carried the pulls for this one, so
    // waiting for their replies was waiting for this step's parameters.
    double push_wait = 0;
    Batch batch;
    for (;;) {
      if (o_.stop && o_.stop->load()) return CancelledError("stopped by a signal");
      if (!sync && iter >= total) break;  // no pull was issued after the last iteration
      const auto wait_start = Clock::now();
      TOWERPS_RETURN_IF_ERROR(WaitPulls(&versions));
      const double waited = push_wait + Seconds(Clock::now() - wait_start);
      const int64_t global = *std::min_element(versions.begin(), versions.end());
      const int64_t progress = sync ? global : iter;
      if (progress >= total) break;
      const int64_t epoch = progress / steps_per_epoch_;
      if (o_.rank == 0 && evals.Due(progress)) {
        TOWERPS_ASSIGN_OR_RETURN(EpochStats eval, EvaluateAll(towers_->model(0), *test_batcher_));
        const std::string at = evals.EndsEpoch(progress)
                                   ? "epoch " + std::to_string(epoch) + " done"
                                   : "step " + std::to_string(progress);
        TOWERPS_LOG(kInfo) << at << ": test accuracy = " << eval.accuracy
                           << ", test loss = " << eval.mean_loss;
        metrics_.Eval(progress, epoch, eval.accuracy, eval.mean_loss);
        console.Evaluated(progress, eval.accuracy);
      }
      if (!batcher_->Next(&batch)) {
        batcher_->StartEpoch(++data_epoch);
        if (!batcher_->Next(&batch)) return InternalError("the batcher produced an empty epoch");
      }
      // Injected slow-down (experiments): before computing, so this worker's gradients are late.
      const double delay = plan_.DelaySeconds(o_.rank, iter, job.seed, last_compute);
      if (delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(delay));
      total_delay_ += delay;
      total_wait_ += waited;
      const auto compute_start = Clock::now();
      // Each variable's average is pushed as soon as the last tower has it, unless it holds a
      // NaN or an infinity and this worker stops on one (the servers would refuse it anyway).
      TOWERPS_ASSIGN_OR_RETURN(StepResult r,
                               towers_->Step(batch.x.data(), batch.labels.data(), batch.size,
                                             [&](int v, const Tensor& average) {
                                               CheckAndPush(v, average, versions[v], iter);
                                             }));
      last_compute = Seconds(Clock::now() - compute_start);
      total_compute_ += last_compute;
      if (divergence_->StopsAfterStep(r.loss, sync ? global + 1 : iter + 1)) {
        return PartialSummary(start, iter + 1, r.loss);  // the caller reports the divergence
      }
      ++iter;
      const bool more = sync || iter < total;
      if (more) IssuePulls(versions, /*advance=*/true, iter);
      const auto push_wait_start = Clock::now();
      TOWERPS_ASSIGN_OR_RETURN(double staleness, WaitPushes());
      push_wait = Seconds(Clock::now() - push_wait_start);
      replace_pending_ = false;
      last_loss = r.loss;
      window.loss += r.loss;
      window.wait += waited;
      window.delay += delay;
      ++window.steps;
      console.Step(progress + 1, r.loss);
      if (iter % o_.worker.log_every == 0) {
        const int64_t step = sync ? global + 1 : iter;
        const double n = static_cast<double>(window.steps);
        const double secs = Seconds(Clock::now() - window.start);
        const double eps = n * job.batch_size / secs;
        console.StepLine(step, window.loss / n, eps, secs / n);
        metrics_.Train(step, epoch, window.loss / n, eps, staleness, secs / n, window.wait / n,
                       window.delay / n);
        window = Window{};
      }
    }
    TrainingSummary s = PartialSummary(start, sync ? total : iter, last_loss);
    TOWERPS_LOG(kInfo) << "finished " << iter << " steps in " << s.train_seconds
                       << " s: " << total_wait_ << " s waiting for parameters, " << total_delay_
                       << " s of injected delay";
    towers_->LogDeviceMemory();
    const int64_t done_steps = s.steps;
    s.examples_per_sec = static_cast<double>((done_steps - (sync ? first : 0)) * job.batch_size) *
                         (sync ? job.EffectiveReplicas() : job.workers) / s.train_seconds;
    if (o_.rank != 0) return s;
    TOWERPS_RETURN_IF_ERROR(FinishAsChief(total, done_steps, &s));
    return s;
  }

 private:
  // The chief, after training: the final parameters once every worker's last update is in,
  // evaluated; the servers' statistics; --final-params-out; the servers asked to stop.
  Status FinishAsChief(int64_t total, int64_t done_steps, TrainingSummary* s) {
    // Async/SSP/softsync: each chunk applies each worker's `total` iterations once (repeats are
    // dropped); the version counts them as the mode does (JobConfig::FinalVersion).
    const int64_t final_version = o_.job.FinalVersion(total);
    std::vector<int64_t> finals(num_vars_, final_version);
    IssuePulls(finals, /*advance=*/false, 0);
    TOWERPS_RETURN_IF_ERROR(WaitPulls(&finals, &s->final_version_max));
    s->final_version_min = *std::min_element(finals.begin(), finals.end());
    TOWERPS_ASSIGN_OR_RETURN(EpochStats eval, EvaluateAll(towers_->model(0), *test_batcher_));
    s->test_accuracy = eval.accuracy;
    s->test_loss = eval.mean_loss;
    metrics_.Eval(done_steps, (done_steps + steps_per_epoch_ - 1) / steps_per_epoch_, eval.accuracy,
                  eval.mean_loss);
    for (int srv = 0; srv < client_->num_servers(); ++srv) {
      TOWERPS_ASSIGN_OR_RETURN(ps::ServerStatsReport st, Await(client_->Stats(srv)));
      AddServerStats(st, s);
    }
    // Another worker's divergence shows as gradients the servers refused.
    if (s->nonfinite_rejected > 0 || !std::isfinite(eval.mean_loss)) s->diverged = true;
    FinishStalenessStats(s);
    TOWERPS_RETURN_IF_ERROR(WriteFinalParameters(towers_->model(0), o_.worker, o_.rank));
    if (o_.worker.shutdown_servers) {
      // Every worker's last update is in (the final pull above waited for it).
      for (int srv = 0; srv < client_->num_servers(); ++srv) {
        TOWERPS_RETURN_IF_ERROR(Await(client_->Shutdown(srv)));
      }
      TOWERPS_LOG(kInfo) << "asked the " << client_->num_servers() << " server(s) to stop";
    }
    return Status::Ok();
  }

  // Issues one pull per variable, in forward-layer order. `advance`: ask for the step after the
  // one just pushed (NextPullVersion), except for the variables whose pull went with their push
  // (CheckAndPush). `exact` (sync): at exactly `versions` (see JoinSyncJob).
  void IssuePulls(const std::vector<int64_t>& versions, bool advance, int64_t clock,
                  bool exact = false) {
    for (int v = 0; v < num_vars_; ++v) {
      const bool sent = std::exchange(pulled_with_push_[v], 0) != 0;
      if (advance && sent) continue;
      const int64_t min_version = advance ? NextPullVersion(versions[v]) : versions[v];
      pulls_[v] = client_->Pull(v, min_version, clock, exact);
    }
  }

  // The version a worker pulls after pushing a gradient computed from `version`: sync the next
  // step (never beyond the last), async and SSP any (SSP's bound goes by the clock).
  int64_t NextPullVersion(int64_t version) const {
    return o_.job.mode == ps::UpdateMode::kSync ? std::min(version + 1, last_step_) : 0;
  }

  template <typename Reply>  // Status or Result<T>
  Reply Await(std::future<Reply>& reply) {
    return AwaitUnlessStopped(reply, o_.stop);
  }
  template <typename Reply>
  Reply Await(std::future<Reply>&& reply) {
    return AwaitUnlessStopped(reply, o_.stop);
  }

  // Waits for the outstanding pulls and loads the values into every tower.
  // `max_version` (may be null): the highest chunk version seen.
  Status WaitPulls(std::vector<int64_t>* versions, int64_t* max_version = nullptr) {
    for (int v = 0; v < num_vars_; ++v) {
      TOWERPS_ASSIGN_OR_RETURN(ps::PulledVariable p, Await(pulls_[v]));
      (*versions)[v] = p.version;
      if (max_version) *max_version = std::max(*max_version, p.max_version);
      for (int t = 0; t < towers_->size(); ++t) p.CopyTo(towers_->model(t).value(v).data());
    }
    return Status::Ok();
  }

  // Runs on a tower thread once `average` (variable v's gradient) is ready: notes where it is
  // not finite, and pushes it unless it is not and this worker stops on that (the servers
  // would refuse it anyway). One read of the gradient.
  void CheckAndPush(int v, const Tensor& average, int64_t version, int64_t iter) {
    if (!divergence_->CheckGradient(v, average)) return;
    if (o_.job.mode == ps::UpdateMode::kSync && version >= last_step_) {
      // This variable's chunks have done every step already: they ran ahead of the others
      // after a server came back from an older checkpoint. Nothing more is pushed to them.
      std::promise<Result<ps::PushReport>> done;
      done.set_value(ps::PushReport{.version = version});
      pushes_[v] = done.get_future();
      return;
    }
    // The next iteration's pull goes with the push, in the same request per chunk, unless
    // there is no next iteration (async: the worker's last); sync always pulls the next step.
    const bool sync = o_.job.mode == ps::UpdateMode::kSync;
    if (!sync && iter + 1 >= last_step_) {
      pushes_[v] = client_->Push(v, version, iter, average, replace_pending_);
      return;
    }
    ps::Client::PushAndPull both = client_->PushThenPull(
        v, version, iter, average, NextPullVersion(version), iter + 1, replace_pending_);
    pushes_[v] = std::move(both.push);
    pulls_[v] = std::move(both.pull);
    pulled_with_push_[v] = 1;
  }

  // Waits for this step's pushes; returns their mean staleness. A non-finite gradient the
  // servers refused (--on-nonfinite continue) counts as dropped.
  Result<double> WaitPushes() {
    double staleness = 0;
    for (int v = 0; v < num_vars_; ++v) {
      Result<ps::PushReport> r = Await(pushes_[v]);
      if (!r.ok() && divergence_->GradientWasNonFinite(v) &&
          r.status().code() == StatusCode::kInvalidArgument) {
        divergence_->CountRefused();
        continue;
      }
      TOWERPS_RETURN_IF_ERROR(r.status());
      staleness += r->mean_staleness / num_vars_;
    }
    return staleness;
  }

  // The summary's fields known to every worker once it stops training.
  TrainingSummary PartialSummary(Clock::time_point start, int64_t steps, double last_loss) const {
    TrainingSummary s;
    if (o_.rank == 0) {  // not evaluated unless training ends
      s.test_accuracy = std::nan("");
      s.test_loss = std::nan("");
    }
    s.train_seconds = Seconds(Clock::now() - start);
    s.wait_seconds = total_wait_;
    s.compute_seconds = total_compute_;
    s.injected_delay_seconds = total_delay_;
    s.epochs = static_cast<double>(steps) / static_cast<double>(steps_per_epoch_);
    s.steps = steps;
    s.final_train_loss = last_loss;
    divergence_->Fill(&s);
    return s;
  }

  TrainerOptions o_;
  std::unique_ptr<TowerGroup> towers_;
  Registry stock_registry_;  // when the options name none
  JobData data_;
  std::unique_ptr<Batcher> batcher_, test_batcher_;
  std::unique_ptr<ps::Client> client_;
  int num_vars_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t start_version_ = ps::kNoVersion;
  // This step's pushes, whose gradients (the towers' averages) are sent without a copy: the
  // group leaves them untouched until the next Step, and WaitPushes comes before it.
  std::vector<std::future<Result<ps::PushReport>>> pushes_;
  std::vector<std::future<Result<ps::PulledVariable>>> pulls_;
  // Per variable: this step's push carried the next pull (set by the tower thread that pushed
  // it, read after Step by IssuePulls).
  std::vector<char> pulled_with_push_;
  MetricsLog metrics_;
  StragglerPlan plan_;
  double total_wait_ = 0;     // seconds spent waiting for parameters (the barrier, in sync)
  double total_delay_ = 0;    // seconds of injected delay
  double total_compute_ = 0;  // seconds in TowerGroup::Step: forward, backward, the pushes
  std::optional<Divergence> divergence_;  // made by Setup, once the variables are known
  bool replace_pending_ = false;          // this step's pushes replace pending ones (see Train)
  int64_t last_step_ = 0;  // the iterations to train (sync: the version training ends at)
};

Result<std::unique_ptr<Trainer>> Trainer::Create(TrainerOptions options) {
  TOWERPS_RETURN_IF_ERROR(options.job.Validate());
  TOWERPS_RETURN_IF_ERROR(options.worker.Validate());
  if (const int n = options.job.ServerProcesses();
      static_cast<int>(options.ps_endpoints.size()) != n) {
    return InvalidArgumentError(
        "--ps-endpoints lists " + std::to_string(options.ps_endpoints.size()) +
        " servers but the job has " + std::to_string(n) + " (--servers and --ps-replicas)");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  TOWERPS_RETURN_IF_ERROR(impl->Setup());
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;
Result<TrainingSummary> Trainer::Run() { return impl_->Run(); }

}  // namespace towerps::worker
