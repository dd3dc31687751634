#include "worker/train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
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
#include "worker/train/chief.h"
#include "worker/train/collapse.h"
#include "worker/train/console.h"
#include "worker/train/divergence.h"
#include "worker/train/eval_schedule.h"
#include "worker/train/job_data.h"
#include "worker/train/join_job.h"
#include "worker/train/local_training.h"
#include "worker/train/step_exchange.h"
#include "worker/train/step_log.h"

namespace towerps::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

class Trainer::Impl {
 public:
  explicit Impl(TrainerOptions o) : o_(std::move(o)) {}

  Status Setup() {
    TOWERPS_RETURN_IF_ERROR(BuildTowers());
    TOWERPS_RETURN_IF_ERROR(LoadData());
    TOWERPS_RETURN_IF_ERROR(ConnectToServers());
    const Model<float>& m0 = towers_->model(0);
    if (o_.worker.log_device_placement) {
      towers_->LogPlacement();
      TOWERPS_LOG(kInfo) << "placement: variable chunks:\n"
                         << client_->placement().Describe(m0.variables());
      client_->LogConnections();
    }
    const std::string tables = m0.num_tables() == 0
                                   ? ""
                                   : ", " + std::to_string(m0.num_tables()) + " embedding table" +
                                         (m0.num_tables() > 1 ? "s" : "") + " on the servers";
    TOWERPS_LOG(kInfo) << o_.job.model << " (" << m0.num_parameters() << " parameters, "
                       << num_vars_ << " variables" << tables << ") on " << towers_->size()
                       << " tower(s); " << steps_per_epoch_ << " steps per epoch of "
                       << o_.job.batch_size << " examples per worker";
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
  Status BuildTowers() {
    TOWERPS_ASSIGN_OR_RETURN(plan_,
                             StragglerPlan::Parse(o_.worker.straggler, o_.worker.straggler_dist,
                                                  o_.worker.slow_workers, o_.job.workers));
    if (o_.registry == nullptr) {
      stock_registry_ = StockRegistry();
      o_.registry = &stock_registry_;
    }
    TOWERPS_ASSIGN_OR_RETURN(const ModelBuilder builder, o_.registry->DescribeModel(o_.job.model));
    TOWERPS_ASSIGN_OR_RETURN(
        towers_, TowerGroup::ForWorker(o_.worker, builder, o_.job.seed, o_.job.batch_size));
    num_vars_ = towers_->model(0).num_variables();
    std::vector<std::string> names;
    for (const auto& var : towers_->model(0).variables()) names.push_back(var.name);
    divergence_.emplace(o_.worker.on_nonfinite, o_.rank, std::move(names));
    return Status::Ok();
  }

  Status LoadData() {
    const ps::JobConfig& job = o_.job;
    const Model<float>& m0 = towers_->model(0);
    TOWERPS_ASSIGN_OR_RETURN(data_, LoadJobData(*o_.registry, job.dataset,
                                                o_.worker.MakeDataRequest(
                                                    m0.input_shape(), job.seed,
                                                    m0.categorical_fields(), m0.multi_hot_fields()),
                                                job.batch_size, o_.worker.shuffle_buffer));
    TOWERPS_ASSIGN_OR_RETURN(JobBatches batches, MakeJobBatches(data_, o_.rank, job.workers));
    batcher_ = std::move(batches.train);
    test_batcher_ = std::move(batches.test);
    TOWERPS_ASSIGN_OR_RETURN(steps_per_epoch_, CheckDataFitsJob(data_, *batcher_, m0, job.model,
                                                                job.workers, job.batch_size));
    collapse_.emplace(ChanceLevelOfCounts(data_.train_layout.label_counts, m0.num_classes()),
                      ChanceLevelOfCounts(data_.test_layout.label_counts, m0.num_classes()));
    if (data_.shuffle_buffer > 0) {
      TOWERPS_LOG(kInfo) << "streaming " << data_.train_layout.name << " ("
                         << data_.train_layout.examples << " examples) through a shuffle buffer of "
                         << data_.shuffle_buffer << " examples";
    }
    return Status::Ok();
  }

  Status ConnectToServers() {
    ps::ClientOptions co;
    co.servers = o_.ps_endpoints;
    co.worker_rank = o_.rank;
    co.rpc_timeout = o_.worker.rpc_timeout;
    co.job = o_.job;
    co.transport.security = o_.security;
    co.transport.path = o_.transport_path;
    TOWERPS_ASSIGN_OR_RETURN(client_, ps::Client::Connect(co));
    exchange_.emplace(*client_, o_.job, towers_->model(0), *divergence_, o_.stop);
    if (o_.worker.profile_steps > 0) {
      std::vector<std::string> names;
      std::vector<int64_t> bytes;
      for (const auto& v : towers_->model(0).variables()) {
        names.push_back(v.name);
        bytes.push_back(NumElements(v.shape) * static_cast<int64_t>(sizeof(float)));
      }
      profile_ = std::make_unique<StepProfile>(o_.worker.profile_steps, std::move(names),
                                               std::move(bytes));
      exchange_->set_profile(profile_.get());
    }
    // Gradients are averaged into the client's shared-memory arena: pushes lend them in place.
    towers_->SetGradientAllocator([client = client_.get()](const Shape& shape, size_t alignment) {
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
  // it holds now. Servers keep the first value they get, so this changes no chunk that has one.
  Status RegisterWithServers() {
    const Model<float>& m0 = towers_->model(0);
    auto registered = client_->Register(m0.variables(), m0.signature());
    TOWERPS_ASSIGN_OR_RETURN(start_version_, AwaitUnlessStopped(registered, o_.stop));
    if (o_.rank != 0 || start_version_ != ps::kNoVersion) return Status::Ok();
    std::vector<std::future<Status>> inits;  // tables take none: their rows start on the servers
    for (int v = 0; v < num_vars_; ++v) inits.push_back(client_->Init(v, m0.GetVariable(v)));
    for (auto& f : inits) TOWERPS_RETURN_IF_ERROR(AwaitUnlessStopped(f, o_.stop));
    return Status::Ok();
  }

  Result<TrainingSummary> Train() {
    int64_t total = o_.job.epochs * steps_per_epoch_;
    if (o_.job.max_steps > 0) total = std::min(total, o_.job.max_steps);
    TOWERPS_ASSIGN_OR_RETURN(
        const JoinPoint start,
        JoinJob(*client_, o_.job, num_vars_, TableVariables(), start_version_, o_.stop));
    int64_t iter = start.iter;
    // What this worker computes at iteration `iter` is a function of it alone: its batch and
    // its dropout masks (and, in sync, the parameters at version `iter`).
    batcher_->Seek(iter);
    TOWERPS_RETURN_IF_ERROR(NextBatch(&batch_));
    exchange_->Begin(start.version, iter, total, start.exact, batch_);
    for (int t = 0; t < towers_->size(); ++t) towers_->model(t).SetTrainingStep(iter);
    EvalSchedule evals(steps_per_epoch_, o_.worker.evals_per_epoch, iter);
    if (!o_.worker.ready_file.empty())
      TOWERPS_RETURN_IF_ERROR(WriteReadyFile(o_.worker.ready_file));
    ConsoleProgress console(steps_per_epoch_, total,
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
      TOWERPS_RETURN_IF_ERROR(exchange_->AwaitValues(*towers_));
      if (profile_) profile_->EndStep();  // the step before: its next values are loaded
      StepTimes t{.wait = push_wait + Seconds(Clock::now() - wait_start)};
      const int64_t progress = exchange_->Progress(iter);
      if (progress >= total) break;
      TOWERPS_ASSIGN_OR_RETURN(const bool collapsed, MaybeEvaluate(evals, progress, console));
      if (collapsed) return StoppedSummary(began, start, iter, log.totals().loss, log);
      TOWERPS_ASSIGN_OR_RETURN(const StepResult r, ComputeStep(iter, &t, &log));
      // The next batch now: its tables' rows ride on this step's pushes of theirs.
      TOWERPS_RETURN_IF_ERROR(NextBatch(&next_batch_));
      exchange_->PushTables(*towers_, iter, &next_batch_);
      if (divergence_->StopsAfterStep(r.loss, progress + 1)) {
        return StoppedSummary(began, start, iter + 1, r.loss, log);  // the caller reports it
      }
      if (auto what = collapse_->Step(progress + 1, r.loss);
          what && divergence_->StopsOnCollapse(*what, progress + 1)) {
        return StoppedSummary(began, start, iter + 1, r.loss, log);
      }
      std::swap(batch_, next_batch_);
      exchange_->PullNext(++iter);
      const auto push_wait_start = Clock::now();
      TOWERPS_ASSIGN_OR_RETURN(const double staleness, exchange_->AwaitPushes());
      push_wait = Seconds(Clock::now() - push_wait_start);
      t.loss = r.loss;
      const int64_t step = o_.job.mode == ps::UpdateMode::kSync ? progress + 1 : iter;
      console.Step(progress + 1, r.loss);
      log.Record(t, iter, step, progress / steps_per_epoch_, staleness, console, metrics_);
    }
    return Finish(began, start, iter, total, log);
  }

  // The chief evaluates the test set where the schedule says (--evals-per-epoch). Returns
  // whether training stops there: the model collapsed to chance, under --on-nonfinite fail.
  Result<bool> MaybeEvaluate(EvalSchedule& evals, int64_t progress, ConsoleProgress& console) {
    if (o_.rank != 0 || !evals.Due(progress)) return false;
    TOWERPS_ASSIGN_OR_RETURN(EpochStats eval,
                             EvaluateAll(towers_->model(0), *test_batcher_, EvalTables()));
    const int64_t epoch = progress / steps_per_epoch_;
    const std::string at = evals.EndsEpoch(progress) ? "epoch " + std::to_string(epoch) + " done"
                                                     : "step " + std::to_string(progress);
    TOWERPS_LOG(kInfo) << at << ": " << DescribeEvaluation(eval);
    metrics_.Eval(progress, epoch, eval);
    console.Evaluated(progress, eval.regression() ? -1 : eval.accuracy);  // no classes: none
    const auto what = collapse_->Evaluated(eval.accuracy, eval.mean_loss);
    return what && divergence_->StopsOnCollapse(*what, progress);
  }

  // The batcher's next batch, into the next epoch when this one is over.
  Status NextBatch(Batch* batch) {
    if (batcher_->Next(batch)) return Status::Ok();
    TOWERPS_RETURN_IF_ERROR(batcher_->status());
    batcher_->StartEpoch(batcher_->epoch() + 1);
    if (!batcher_->Next(batch)) {
      TOWERPS_RETURN_IF_ERROR(batcher_->status());
      return InternalError("the batcher produced an empty epoch");
    }
    return Status::Ok();
  }

  // The tables' variable ids.
  std::vector<uint32_t> TableVariables() const {
    std::vector<uint32_t> ids;
    const Model<float>& m0 = towers_->model(0);
    for (int t = 0; t < m0.num_tables(); ++t)
      ids.push_back(static_cast<uint32_t>(m0.table_variable(t)));
    return ids;
  }

  // What evaluation runs before each test batch: the tables' rows of its ids, pulled.
  std::function<Status(const Batch&)> EvalTables() {
    if (towers_->model(0).num_tables() == 0) return nullptr;
    return [this](const Batch& b) {
      return exchange_->tables().LoadForEvaluation(b, towers_->model(0));
    };
  }

  // Iteration `iter` on the towers (its batch is batch_), its gradients pushed as they are
  // ready; counts its times.
  Result<StepResult> ComputeStep(int64_t iter, StepTimes* t, StepLog* log) {
    // Injected slow-down (experiments): before computing, so this worker's gradients are late.
    t->delay = plan_.DelaySeconds(o_.rank, iter, o_.job.seed, last_compute_);
    if (t->delay > 0) std::this_thread::sleep_for(std::chrono::duration<double>(t->delay));
    const auto compute_start = Clock::now();
    if (!batch_.targets.empty()) towers_->SetTargets(batch_.targets.data());
    if (profile_) profile_->BeginStep();
    Result<StepResult> r = towers_->Step(batch_.x.data(), batch_.labels.data(), batch_.size,
                                         [&](int v, const Tensor& average) {
                                           if (profile_)
                                             profile_->Mark(v, StepProfile::Event::kGradient);
                                           exchange_->Push(v, average, iter);
                                         });
    if (profile_) profile_->EndCompute();
    t->compute = last_compute_ = Seconds(Clock::now() - compute_start);
    log->Count(*t);
    return r;
  }

  Result<TrainingSummary> Finish(Clock::time_point began, const JoinPoint& start, int64_t iter,
                                 int64_t total, const StepLog& log) {
    const bool sync = o_.job.mode == ps::UpdateMode::kSync;
    TrainingSummary s = PartialSummary(began, sync ? total : iter, log.totals().loss, log);
    TOWERPS_LOG(kInfo) << "finished " << iter << " steps in " << s.train_seconds
                       << " s: " << s.wait_seconds << " s waiting for parameters, "
                       << s.injected_delay_seconds << " s of injected delay";
    towers_->LogDeviceMemory();
    s.examples_per_sec = ExamplesPerSec(s, start);
    if (o_.rank != 0) {
      // Its updates are all in at the final version; a server restored from an older checkpoint
      // before then lost some: the pull fails, and Run() rejoins and redoes them.
      int64_t lowest = 0, highest = ps::kNoVersion;
      TOWERPS_RETURN_IF_ERROR(
          exchange_->PullFinal(*towers_, o_.job.FinalVersion(total), &lowest, &highest));
      if (o_.worker.shutdown_servers) LeaveServers(*client_, o_.stop);
      return s;
    }
    TOWERPS_RETURN_IF_ERROR(
        FinishAsChief({*client_, *exchange_, *towers_, *test_batcher_, metrics_, o_.job, o_.worker,
                       steps_per_epoch_, o_.stop, EvalTables()},
                      total, s.steps, &s));
    // The final parameters at chance: a collapse, whatever the policy (training is over).
    if (auto what = collapse_->Evaluated(s.test_accuracy, s.test_loss)) {
      divergence_->StopsOnCollapse(*what, s.steps);
      divergence_->Fill(&s);
    }
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
    TrainingSummary s = log.Summary(Seconds(Clock::now() - began), steps, steps_per_epoch_,
                                    last_loss, /*chief=*/o_.rank == 0);
    divergence_->Fill(&s);
    if (profile_) {
      s.profile = profile_->Report();
      if (s.profile) TOWERPS_LOG(kInfo) << s.profile->Describe();
    }
    return s;
  }

  TrainerOptions o_;
  std::unique_ptr<TowerGroup> towers_;
  Registry stock_registry_;  // when the options name none
  JobData data_;
  std::unique_ptr<BatchSource> batcher_, test_batcher_;
  Batch batch_, next_batch_;  // this iteration's, and the next one's
  std::unique_ptr<ps::Client> client_;
  int num_vars_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t start_version_ = ps::kNoVersion;
  std::optional<Divergence> divergence_;   // made once the variables are known
  std::optional<CollapseWatch> collapse_;  // made once the data is loaded
  std::unique_ptr<StepProfile> profile_;   // --profile-steps; outlives exchange_, which marks it
  std::optional<StepExchange> exchange_;   // made once connected
  MetricsLog metrics_;
  StragglerPlan plan_;
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
