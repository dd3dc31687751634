#include "worker/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "common/logging.h"
#include "job/version.h"
#include "ps/client/client.h"
#include "worker/tower_group.h"
#include "worker/train/chief.h"
#include "worker/train/console.h"
#include "worker/train/eval_schedule.h"
#include "worker/train/join_job.h"
#include "worker/train/local_training.h"
#include "worker/train/step_exchange.h"
#include "worker/train/step_log.h"
#include "worker/train/training_parts.h"

namespace towerps::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

class Trainer::Impl {
 public:
  explicit Impl(TrainerOptions o) : o_(std::move(o)) {}

  Status Setup() {
    TOWERPS_ASSIGN_OR_RETURN(p_, TrainingParts::Make(o_.registry, o_.job, o_.worker, o_.rank));
    TOWERPS_RETURN_IF_ERROR(ConnectToServers());
    const Model<float>& m0 = p_->towers->model(0);
    if (o_.worker.log_device_placement) {
      p_->towers->LogPlacement(o_.job.batch_size);
      TOWERPS_LOG(kInfo) << "placement: variable chunks:\n"
                         << client_->placement().Describe(m0.variables());
      client_->LogConnections();
    }
    TOWERPS_LOG(kInfo) << p_->Describe();
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
      exchange_->DrainPushes();
    }
  }

 private:
  Status ConnectToServers() {
    TOWERPS_ASSIGN_OR_RETURN(client_,
                             worker::ConnectToServers({.rank = o_.rank,
                                                       .endpoints = o_.ps_endpoints,
                                                       .job = o_.job,
                                                       .rpc_timeout = o_.worker.rpc_timeout,
                                                       .security = o_.security,
                                                       .path = o_.transport_path}));
    exchange_.emplace(*client_, o_.job, p_->towers->model(0), *p_->divergence, o_.stop);
    exchange_->set_bucket_bytes(o_.worker.bucket_bytes);
    if (o_.worker.profile_steps > 0) {
      std::vector<std::string> names;
      std::vector<int64_t> bytes;
      for (const auto& v : p_->towers->model(0).variables()) {
        names.push_back(v.name);
        bytes.push_back(NumElements(v.shape) * static_cast<int64_t>(sizeof(float)));
      }
      profile_ = std::make_unique<StepProfile>(o_.worker.profile_steps, std::move(names),
                                               std::move(bytes));
      exchange_->set_profile(profile_.get());
    }
    // Gradients are averaged into the client's shared-memory arena: pushes lend them in place.
    p_->towers->SetGradientAllocator(
        [client = client_.get()](const Shape& shape, size_t alignment) {
          return client->Allocate(shape, alignment);
        });
    TOWERPS_RETURN_IF_ERROR(RegisterWithServers());
    if (start_version_ > 0) {
      TOWERPS_LOG(kInfo) << "the servers hold version " << start_version_
                         << " (restored): continuing from there";
    }
    return Status::Ok();
  }

  // Declares the model to every server; start_version_ becomes the lowest version they restored
  // (kNoVersion where one restored nothing). Then the chief gives every variable its value: the
  // initial one in a fresh job, or, after a server came back without a checkpoint, the values
  // it holds now.
  Status RegisterWithServers() {
    const Model<float>& m0 = p_->towers->model(0);
    TOWERPS_ASSIGN_OR_RETURN(start_version_,
                             RegisterModel(
                                 *client_, m0.variables(), m0.signature(), o_.rank, p_->num_vars,
                                 [&m0](int v) { return m0.GetVariable(v); }, o_.stop));
    return Status::Ok();
  }

  Result<TrainingSummary> Train() {
    int64_t total = o_.job.epochs * p_->steps_per_epoch;
    if (o_.job.max_steps > 0) total = std::min(total, o_.job.max_steps);
    TOWERPS_ASSIGN_OR_RETURN(const JoinPoint start,
                             JoinJob(*client_, o_.job, p_->num_vars, p_->TableVariables(),
                                     start_version_, o_.worker.join_timeout, o_.stop));
    int64_t iter = start.iter;
    // What this worker computes at iteration `iter` is a function of it alone: its batch and
    // its dropout masks (and, in sync, the parameters at version `iter`).
    p_->batcher->Seek(iter);
    TOWERPS_RETURN_IF_ERROR(p_->NextBatch(&batch_));
    exchange_->Begin(start.version, iter, total, start.exact, batch_);
    TOWERPS_RETURN_IF_ERROR(PrepareNextBatch());
    for (int t = 0; t < p_->towers->size(); ++t) p_->towers->model(t).SetTrainingStep(iter);
    EvalSchedule evals(p_->steps_per_epoch, o_.worker.evals_per_epoch, iter);
    if (!o_.worker.ready_file.empty())
      TOWERPS_RETURN_IF_ERROR(WriteReadyFile(o_.worker.ready_file));
    ConsoleProgress console(p_->steps_per_epoch, total,
                            {.bar = o_.worker.progress_bar,
                             .progress_lines = o_.worker.progress_lines && o_.rank == 0});
    metrics_.Open(o_.worker.metrics_out, o_.worker.logdir, o_.rank);
    const auto began = Clock::now();
    StepLog log(o_.worker.log_every, o_.job.batch_size);
    // The wait at the end of the last step: its pushes carried the pulls for this one.
    double push_wait = 0;
    for (;;) {
      if (o_.stop && o_.stop->load()) return CancelledError("stopped by a signal");
      if (exchange_->RanLastIteration(iter)) break;  // no pull was issued after it
      const auto wait_start = Clock::now();
      TOWERPS_RETURN_IF_ERROR(exchange_->AwaitValues(*p_->towers));
      if (profile_) profile_->EndStep();  // the step before: its next values are loaded
      StepTimes t{.wait = push_wait + Seconds(Clock::now() - wait_start)};
      const int64_t progress = exchange_->Progress(iter);
      if (progress >= total) break;
      TOWERPS_ASSIGN_OR_RETURN(const bool collapsed,
                               p_->MaybeEvaluate(evals, progress, console, metrics_, EvalTables()));
      if (collapsed) return StoppedSummary(began, start, iter, log.totals().loss, log);
      TOWERPS_ASSIGN_OR_RETURN(const StepResult r, ComputeStep(iter, &t, &log));
      // The next batch's rows ride on this step's pushes of the tables, and the bucket's rest
      // with them (a model without tables: alone).
      exchange_->PushTables(TableExchange::FromTowers(*p_->towers), iter, /*ahead=*/true);
      if (p_->divergence->StopsAfterStep(r.loss, progress + 1)) {
        return StoppedSummary(began, start, iter + 1, r.loss, log);  // the caller reports it
      }
      if (auto what = p_->collapse->Step(progress + 1, r.loss);
          what && p_->divergence->StopsOnCollapse(*what, progress + 1)) {
        return StoppedSummary(began, start, iter + 1, r.loss, log);
      }
      std::swap(batch_, next_batch_);
      exchange_->PullNext(++iter);
      // The batch after, while this step's exchange is under way: off its critical path; so are
      // the next values answered already.
      TOWERPS_RETURN_IF_ERROR(PrepareNextBatch());
      const auto push_wait_start = Clock::now();  // loading counts as waiting, as in AwaitValues
      exchange_->LoadArrived(*p_->towers);
      TOWERPS_ASSIGN_OR_RETURN(const double staleness, exchange_->AwaitPushes());
      push_wait = Seconds(Clock::now() - push_wait_start);
      t.loss = r.loss;
      const int64_t step = PullPolicy::For(o_.job.mode).Progress(iter, progress + 1);
      console.Step(progress + 1, r.loss);
      log.Record(t, iter, step, progress / p_->steps_per_epoch, staleness, console, metrics_);
    }
    return Finish(began, start, iter, total, log, console);
  }

  // Reads next_batch_ and makes its tables' ids unique (TableExchange::Prepare): a step's
  // pushes of the tables carry their pull.
  Status PrepareNextBatch() {
    TOWERPS_RETURN_IF_ERROR(p_->NextBatch(&next_batch_));
    exchange_->tables().Prepare(next_batch_);
    return Status::Ok();
  }

  // What evaluation runs before each test batch: the tables' rows of its ids, pulled.
  std::function<Status(const Batch&)> EvalTables() {
    if (p_->towers->model(0).num_tables() == 0) return nullptr;
    return [this](const Batch& b) {
      return exchange_->tables().LoadForEvaluation(b, p_->towers->model(0));
    };
  }

  // Iteration `iter` on the towers (its batch is batch_), its gradients pushed as they are
  // ready; counts its times.
  Result<StepResult> ComputeStep(int64_t iter, StepTimes* t, StepLog* log) {
    // Injected slow-down (experiments): before computing, so this worker's gradients are late.
    t->delay = p_->plan.DelaySeconds(o_.rank, iter, o_.job.seed, last_compute_);
    if (t->delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(t->delay));
    const auto compute_start = Clock::now();
    if (!batch_.targets.empty()) p_->towers->SetTargets(batch_.targets.data());
    if (profile_) profile_->BeginStep();
    Result<StepResult> r = p_->towers->Step(batch_.x.data(), batch_.labels.data(), batch_.size,
                                            [&](int v, const Tensor& average) {
                                              if (profile_)
                                                profile_->Mark(v, StepProfile::Event::kGradient);
                                              exchange_->Offer(v, average, iter);
                                            });
    if (profile_) {
      exchange_->tables().MarkGradients();  // computed by backward; pushed with the next ids
      profile_->EndCompute();
    }
    t->compute = last_compute_ = Seconds(Clock::now() - compute_start);
    log->Count(*t);
    return r;
  }

  Result<TrainingSummary> Finish(Clock::time_point began, const JoinPoint& start, int64_t iter,
                                 int64_t total, const StepLog& log, ConsoleProgress& console) {
    TrainingSummary s = PartialSummary(began, PullPolicy::For(o_.job.mode).Progress(iter, total),
                                       log.totals().loss, log);
    TOWERPS_LOG(kInfo) << "finished " << iter << " steps in " << s.train_seconds
                       << " s: " << s.wait_seconds << " s waiting for parameters, "
                       << s.injected_delay_seconds << " s of injected delay";
    p_->towers->LogDeviceMemory();
    s.examples_per_sec = ExamplesPerSec(s, start);
    if (o_.rank != 0) {
      // Its updates are all in at the final version; a server restored from an older checkpoint
      // before then lost some: the pull fails, and Run() rejoins and redoes them.
      int64_t lowest = 0, highest = ps::kNoVersion;
      TOWERPS_RETURN_IF_ERROR(
          exchange_->PullFinal(*p_->towers, o_.job.FinalVersion(total), &lowest, &highest));
      LeaveServers(*client_, o_.stop, iter);
      return s;
    }
    TOWERPS_RETURN_IF_ERROR(
        FinishAsChief({*client_, *exchange_, *p_->towers, *p_->test_batcher, metrics_, o_.job,
                       o_.worker, p_->steps_per_epoch, o_.stop, EvalTables()},
                      total, s.steps, &s));
    p_->JudgeFinal(&s);
    console.Evaluated(total, s.test_rmse != -1 ? -1 : s.test_accuracy);  // the bar ends on it
    return s;
  }

  // All workers' examples per second, from this worker's steps (sync: the job's, from where it
  // joined).
  double ExamplesPerSec(const TrainingSummary& s, const JoinPoint& start) const {
    const bool sync = o_.job.mode == ps::UpdateMode::kSync;
    return JobExamplesPerSec(o_.job, s.steps - (sync ? start.version : 0), s.train_seconds);
  }

  // The summary of a worker that stopped on a divergence (the caller reports it): what it
  // counted, and at the chief the servers' counters as they stand.
  TrainingSummary StoppedSummary(Clock::time_point began, const JoinPoint& start, int64_t steps,
                                 double last_loss, const StepLog& log) {
    TrainingSummary s = PartialSummary(began, steps, last_loss, log);
    s.examples_per_sec = ExamplesPerSec(s, start);
    if (o_.rank == 0) {
      if (Status st = GatherServerStats(*client_, o_.stop, &s); !st.ok()) {
        TOWERPS_LOG(kWarning) << "the servers' counters are not in the summary: " << st.message();
      }
    }
    return s;
  }

  // The summary's fields known to every worker once it stops training.
  TrainingSummary PartialSummary(Clock::time_point began, int64_t steps, double last_loss,
                                 const StepLog& log) const {
    TrainingSummary s = log.Summary(Seconds(Clock::now() - began), steps, p_->steps_per_epoch,
                                    last_loss, /*chief=*/o_.rank == 0);
    p_->divergence->Fill(&s);
    if (profile_) {
      s.profile = profile_->Report();
      if (s.profile) TOWERPS_LOG(kInfo) << s.profile->Describe();
    }
    return s;
  }

  TrainerOptions o_;
  std::unique_ptr<TrainingParts> p_;  // towers, data, batchers, divergence and collapse records
  Batch batch_, next_batch_;          // this iteration's, and the next one's (its ids prepared)
  std::unique_ptr<ps::Client> client_;
  int64_t start_version_ = ps::kNoVersion;
  std::unique_ptr<StepProfile> profile_;  // --profile-steps; outlives exchange_, which marks it
  std::optional<StepExchange> exchange_;  // made once connected
  MetricsLog metrics_;
  double last_compute_ = 0;  // seconds of the last step's compute (stragglers scale by it)
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
