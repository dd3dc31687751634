#include "worker/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "common/logging.h"
#include "kernels/backend_buffer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#ifdef TOWERPS_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif
#include "ps/client.h"
#include "worker/data/batcher.h"
#include "worker/model/zoo.h"
#include "worker/straggler.h"
#include "worker/towers.h"
#include "worker/train/job_data.h"
#include "worker/train/local_training.h"
#include "worker/train/metrics_log.h"

namespace towerps::worker {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Tower {
  TowerDevice device;
  std::unique_ptr<kernels::Backend<float>> backend;
  std::unique_ptr<Model<float>> model;
};

// Mean and 99th percentile of a staleness histogram (last bucket: that value or more).
void HistogramStats(const std::vector<uint64_t>& h, double* mean, double* p99) {
  uint64_t n = 0;
  double sum = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    n += h[i];
    sum += static_cast<double>(i) * static_cast<double>(h[i]);
  }
  *mean = n ? sum / static_cast<double>(n) : 0;
  *p99 = 0;
  uint64_t seen = 0;
  for (size_t i = 0; i < h.size() && n; ++i) {
    seen += h[i];
    if (static_cast<double>(seen) >= 0.99 * static_cast<double>(n)) {
      *p99 = static_cast<double>(i);
      break;
    }
  }
}

}  // namespace

class Trainer::Impl {
 public:
  explicit Impl(TrainerOptions o) : o_(std::move(o)) {}
  ~Impl() {
    if (reduce_.enabled) {
      for (Tensor& t : avg_) towers_[0].backend->UnpinHostMemory(t.f32());
    }
  }

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
    TOWERPS_ASSIGN_OR_RETURN(ModelBuilder builder, ZooModel(job.model));
    for (const TowerDevice& d : devices) {
      Tower t;
      t.device = d;
      TOWERPS_ASSIGN_OR_RETURN(
          t.backend, CreateTowerBackend(d, {.intra_op_threads = o_.worker.intra_op_threads,
                                            .gpu_memory_fraction = o_.worker.gpu_memory_fraction,
                                            .allow_growth = o_.worker.allow_growth}));
      // The same seed everywhere: every tower and worker starts from the chief's values anyway.
      TOWERPS_ASSIGN_OR_RETURN(t.model, builder.Build<float>(t.backend.get(), job.seed));
      towers_.push_back(std::move(t));
    }
    Model<float>& m0 = *towers_[0].model;
    num_vars_ = m0.num_variables();
    TOWERPS_ASSIGN_OR_RETURN(data_, LoadJobData(job.dataset, o_.worker.data_dir, m0.input_shape(),
                                                job.batch_size, job.seed));
    BatcherOptions train = data_.train_options;
    train.rank = o_.rank;
    train.num_workers = job.workers;
    TOWERPS_ASSIGN_OR_RETURN(batcher_, Batcher::Create(&data_.train, train));
    TOWERPS_ASSIGN_OR_RETURN(test_batcher_, Batcher::Create(&data_.test, data_.test_options));
    steps_per_epoch_ = data_.train.size() / job.workers / job.batch_size;
    if (steps_per_epoch_ < 1) {
      return InvalidArgumentError(
          data_.train.name + " has " + std::to_string(data_.train.size()) +
          " examples: too few for --workers=" + std::to_string(job.workers) +
          " x --batch-size=" + std::to_string(job.batch_size));
    }
    for (int v = 0; v < num_vars_; ++v) avg_.push_back(Tensor::Empty(m0.variables()[v].shape));
    TOWERPS_RETURN_IF_ERROR(SetupDeviceReduction());
    done_ = std::make_unique<std::atomic<int>[]>(num_vars_);
    pushes_.resize(num_vars_);
    pulls_.resize(num_vars_);

    ps::ClientOptions co;
    co.servers = o_.ps_endpoints;
    co.worker_rank = o_.rank;
    co.rpc_timeout = o_.worker.rpc_timeout;
    co.job = job;
    TOWERPS_ASSIGN_OR_RETURN(client_, ps::Client::Connect(co));
    TOWERPS_ASSIGN_OR_RETURN(start_version_,
                             Await(client_->Register(m0.variables(), m0.signature())));
    if (o_.rank == 0 && start_version_ < 0) {
      std::vector<std::future<Status>> inits;
      for (int v = 0; v < num_vars_; ++v) inits.push_back(client_->Init(v, m0.GetVariable(v)));
      for (auto& f : inits) TOWERPS_RETURN_IF_ERROR(Await(f));
    } else if (start_version_ > 0) {
      TOWERPS_LOG(kInfo) << "the servers hold version " << start_version_
                         << " (restored): continuing from there";
    }
    if (o_.worker.log_device_placement) LogPlacement();
    TOWERPS_LOG(kInfo) << job.model << " (" << m0.num_parameters() << " parameters, " << num_vars_
                       << " variables) on " << towers_.size() << " tower(s); " << steps_per_epoch_
                       << " steps per epoch of " << job.batch_size << " examples per worker";
    return Status::Ok();
  }

  Result<TrainingSummary> Run() {
    const ps::JobConfig& job = o_.job;
    const bool sync = job.mode == ps::UpdateMode::kSync;
    int64_t total = job.epochs * steps_per_epoch_;
    if (job.max_steps > 0) total = std::min(total, job.max_steps);
    const int64_t first = std::max<int64_t>(start_version_, 0);
    // Async and SSP versions count every worker's updates; sync versions count steps.
    int64_t iter = sync ? first : first / job.workers;
    std::vector<int64_t> versions(num_vars_, first);
    IssuePulls(versions, /*advance=*/false, iter, total);
    int64_t data_epoch = sync ? first / steps_per_epoch_ : iter / steps_per_epoch_;
    batcher_->StartEpoch(data_epoch);
    int64_t last_eval_epoch = data_epoch;
    tty_ = isatty(STDOUT_FILENO);
    metrics_.Open(o_.worker.metrics_out, o_.rank);

    const auto start = Clock::now();
    auto window_start = start;
    int64_t window_steps = 0;
    double window_loss = 0, window_wait = 0, window_delay = 0;
    double last_loss = 0, last_compute = 0;
    Batch batch;
    for (;;) {
      if (o_.stop && o_.stop->load()) return CancelledError("stopped by a signal");
      if (!sync && iter >= total) break;  // no pull was issued after the last iteration
      const auto wait_start = Clock::now();
      TOWERPS_RETURN_IF_ERROR(WaitPulls(&versions));
      const double waited = Seconds(Clock::now() - wait_start);
      const int64_t global = *std::min_element(versions.begin(), versions.end());
      const int64_t progress = sync ? global : iter;
      if (progress >= total) break;
      const int64_t epoch = progress / steps_per_epoch_;
      if (o_.rank == 0 && epoch > last_eval_epoch) {
        TOWERPS_ASSIGN_OR_RETURN(EpochStats eval, EvaluateAll(*towers_[0].model, *test_batcher_));
        TOWERPS_LOG(kInfo) << "epoch " << epoch << " done: test accuracy = " << eval.accuracy
                           << ", test loss = " << eval.mean_loss;
        metrics_.Eval(progress, epoch, eval.accuracy, eval.mean_loss);
        last_eval_epoch = epoch;
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
      TOWERPS_ASSIGN_OR_RETURN(StepResult r, ComputeAndPush(batch, versions, iter));
      last_compute = Seconds(Clock::now() - compute_start);
      ++iter;
      const bool more = sync || iter < total;
      if (more) IssuePulls(versions, /*advance=*/true, iter, total);
      TOWERPS_ASSIGN_OR_RETURN(double staleness, WaitPushes());
      last_loss = r.loss;
      window_loss += r.loss;
      window_wait += waited;
      window_delay += delay;
      ++window_steps;
      Progress(progress % steps_per_epoch_ + 1, epoch);
      if (iter % o_.worker.log_every == 0) {
        const double secs = Seconds(Clock::now() - window_start);
        const double eps = static_cast<double>(window_steps * job.batch_size) / secs;
        std::printf("%sstep %lld, loss = %.4f (%.1f examples/sec; %.4f sec/batch)\n",
                    tty_ ? "\r\033[K" : "", static_cast<long long>(sync ? global + 1 : iter),
                    window_loss / window_steps, eps, secs / window_steps);
        std::fflush(stdout);
        metrics_.Train(sync ? global + 1 : iter, epoch, window_loss / window_steps, eps, staleness,
                       secs / window_steps, window_wait / window_steps,
                       window_delay / window_steps);
        window_start = Clock::now();
        window_steps = 0;
        window_loss = window_wait = window_delay = 0;
      }
    }
    TrainingSummary s;
    s.train_seconds = Seconds(Clock::now() - start);
    s.wait_seconds = total_wait_;
    s.injected_delay_seconds = total_delay_;
    TOWERPS_LOG(kInfo) << "finished " << iter << " steps in " << s.train_seconds
                       << " s: " << total_wait_ << " s waiting for parameters, " << total_delay_
                       << " s of injected delay";
    LogDeviceMemory();
    s.epochs = job.epochs;
    s.final_train_loss = last_loss;
    const int64_t done_steps = sync ? total : iter;
    s.steps = done_steps;
    s.examples_per_sec = static_cast<double>((done_steps - (sync ? first : 0)) * job.batch_size) *
                         (sync ? job.EffectiveReplicas() : job.workers) / s.train_seconds;
    if (o_.rank != 0) return s;

    // Chief: the final parameters once every worker's last update is in, evaluated.
    const int64_t final_version =
        sync ? total : first + job.workers * (total - first / job.workers);
    std::vector<int64_t> finals(num_vars_, final_version);
    IssuePulls(finals, /*advance=*/false, 0, final_version);
    TOWERPS_RETURN_IF_ERROR(WaitPulls(&finals));
    TOWERPS_ASSIGN_OR_RETURN(EpochStats eval, EvaluateAll(*towers_[0].model, *test_batcher_));
    s.test_accuracy = eval.accuracy;
    s.test_loss = eval.mean_loss;
    metrics_.Eval(done_steps, (done_steps + steps_per_epoch_ - 1) / steps_per_epoch_, eval.accuracy,
                  eval.mean_loss);
    std::vector<uint64_t> hist;
    for (int srv = 0; srv < client_->num_servers(); ++srv) {
      TOWERPS_ASSIGN_OR_RETURN(ps::ServerStatsReport st, client_->Stats(srv).get());
      s.dropped_stale += st.stale_dropped;
      s.updates_applied += st.updates_applied;
      hist.resize(std::max(hist.size(), st.staleness_histogram.size()), 0);
      for (size_t b = 0; b < st.staleness_histogram.size(); ++b)
        hist[b] += st.staleness_histogram[b];
    }
    HistogramStats(hist, &s.mean_staleness, &s.p99_staleness);
    while (!hist.empty() && hist.back() == 0) hist.pop_back();
    s.staleness_histogram = hist;
    if (!o_.worker.final_params_out.empty()) TOWERPS_RETURN_IF_ERROR(WriteFinalParams());
    if (o_.worker.shutdown_servers) {
      // Every worker's last update is in (the final pull above waited for it).
      for (int srv = 0; srv < client_->num_servers(); ++srv) {
        TOWERPS_RETURN_IF_ERROR(client_->Shutdown(srv).get());
      }
      TOWERPS_LOG(kInfo) << "asked the " << client_->num_servers() << " server(s) to stop";
    }
    return s;
  }

 private:
  // Issues one pull per variable, in forward-layer order. `advance`: ask for the step after the
  // one just pushed (sync: version + 1, never beyond `cap`).
  void IssuePulls(const std::vector<int64_t>& versions, bool advance, int64_t clock, int64_t cap) {
    const bool sync = o_.job.mode == ps::UpdateMode::kSync;
    for (int v = 0; v < num_vars_; ++v) {
      int64_t min_version = versions[v];
      if (advance) min_version = sync ? std::min(versions[v] + 1, cap) : 0;
      pulls_[v] = client_->Pull(v, min_version, clock);
    }
  }

  // The reply of one request; a stop request ends the wait early (the client's RPC deadline
  // bounds it otherwise), so a signalled worker stops promptly even while a server is silent.
  template <typename Reply>  // Status or Result<T>
  Reply Await(std::future<Reply>& reply) {
    while (reply.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (o_.stop && o_.stop->load()) return CancelledError("stopped by a signal");
    }
    return reply.get();
  }
  template <typename Reply>
  Reply Await(std::future<Reply>&& reply) {
    return Await(reply);
  }

  // Waits for the outstanding pulls and loads the values into every tower.
  Status WaitPulls(std::vector<int64_t>* versions) {
    for (int v = 0; v < num_vars_; ++v) {
      TOWERPS_ASSIGN_OR_RETURN(ps::PulledVariable p, Await(pulls_[v]));
      (*versions)[v] = p.version;
      for (Tower& t : towers_) p.CopyTo(t.model->value(v).data());
    }
    return Status::Ok();
  }

  // Several GPU towers: their gradients are averaged on tower 0's GPU (peer copies, then
  // AverageOf in tower order) and copied to the host once, instead of each tower copying its own
  // out. Scratch for the peers' gradients and the average live on tower 0's device.
  Status SetupDeviceReduction() {
#ifdef TOWERPS_WITH_CUDA
    if (towers_.size() < 2) return Status::Ok();
    for (const Tower& t : towers_) {
      if (dynamic_cast<kernels::CudaBackend*>(t.backend.get()) == nullptr) return Status::Ok();
    }
    kernels::Backend<float>* b0 = towers_[0].backend.get();
    const int k = static_cast<int>(towers_.size());
    reduce_.scratch.resize(num_vars_);
    for (int v = 0; v < num_vars_; ++v) {
      const int64_t n = avg_[v].num_elements();
      for (int t = 1; t < k; ++t) {
        TOWERPS_ASSIGN_OR_RETURN(auto b, kernels::BackendBuffer<float>::Allocate(b0, n));
        reduce_.scratch[v].push_back(std::move(b));
      }
      TOWERPS_ASSIGN_OR_RETURN(auto avg, kernels::BackendBuffer<float>::Allocate(b0, n));
      reduce_.average.push_back(std::move(avg));
      b0->PinHostMemory(avg_[v].f32(), avg_[v].byte_size());
    }
    reduce_.queued.assign(k, std::vector<char>(num_vars_, 0));
    reduce_.enabled = true;
    TOWERPS_LOG(kInfo) << "tower gradients are averaged on " << towers_[0].device.name();
#endif
    return Status::Ok();
  }

  // The step of ComputeAndPush with the device reduction. Tower t > 0 only reports, per
  // variable, that its gradient is queued; tower 0, on its own thread (so each backend still
  // has one caller), waits for those reports, queues the peer copies (each ordered after the
  // peer's queued work by an event), the average and one copy to the host, and once its
  // backward is queued, pushes each average as it lands, while the GPUs go on.
  Result<StepResult> ComputeAndPushOnDevice(const Batch& batch,
                                            const std::vector<int64_t>& versions, int64_t clock) {
#ifdef TOWERPS_WITH_CUDA
    const int k = static_cast<int>(towers_.size());
    const int slice = batch.size / k;
    const int64_t example = NumElements(batcher_->example_shape());
    {
      std::lock_guard<std::mutex> lock(reduce_.mu);
      for (auto& q : reduce_.queued) std::fill(q.begin(), q.end(), 0);
      reduce_.failed = false;
    }
    auto* b0 = static_cast<kernels::CudaBackend*>(towers_[0].backend.get());
    std::vector<std::pair<uint64_t, int>> copies;  // tower 0's thread only
    Status reduce_status = Status::Ok();           // tower 0's thread only
    auto reduce = [&](int v) {
      {
        std::unique_lock<std::mutex> lock(reduce_.mu);
        const bool ready = reduce_.cv.wait_for(lock, o_.worker.rpc_timeout, [&] {
          if (reduce_.failed) return true;
          for (int t = 1; t < k; ++t) {
            if (!reduce_.queued[t][v]) return false;
          }
          return true;
        });
        if (!ready || reduce_.failed) {
          if (reduce_status.ok()) {
            reduce_status = ready ? InternalError("a tower failed during backward")
                                  : TimeoutError("towers did not reach variable " +
                                                 std::to_string(v) + " in time");
          }
          return;
        }
      }
      const int64_t n = avg_[v].num_elements();
      const size_t bytes = static_cast<size_t>(n) * sizeof(float);
      std::vector<const float*> in = {towers_[0].model->backend_gradient(v)};
      for (int t = 1; t < k; ++t) {
        auto* peer = static_cast<kernels::CudaBackend*>(towers_[t].backend.get());
        float* dst = reduce_.scratch[v][t - 1].data();
        b0->CopyFromPeer(*peer, towers_[t].model->backend_gradient(v), bytes, dst);
        in.push_back(dst);
      }
      b0->AverageOf(k, in.data(), n, reduce_.average[v].data());
      copies.emplace_back(b0->CopyToHostAsync(reduce_.average[v].data(), bytes, avg_[v].f32()), v);
    };
    auto report = [&](int t, int v) {
      std::lock_guard<std::mutex> lock(reduce_.mu);
      reduce_.queued[t][v] = 1;
      reduce_.cv.notify_all();
    };
    std::vector<Result<StepResult>> results(k, StepResult{});
    auto run = [&](int t) {
      auto hook = [&, t](int v) {
        if (t == 0) {
          reduce(v);
        } else {
          report(t, v);
        }
      };
      results[t] = towers_[t].model->TrainStep(batch.x.data() + t * slice * example,
                                               batch.labels.data() + t * slice, slice, hook,
                                               Model<float>::GradientDelivery::kBackend);
      if (!results[t].ok()) {
        std::lock_guard<std::mutex> lock(reduce_.mu);
        reduce_.failed = true;
        reduce_.cv.notify_all();
      }
      if (t != 0) return;
      // Every queued copy is waited for, even after a failure: its buffers are reused.
      for (const auto& [ticket, v] : copies) {
        b0->WaitCopy(ticket);
        if (results[0].ok() && reduce_status.ok()) {
          pushes_[v] = client_->Push(v, versions[v], clock, avg_[v]);
        }
      }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < k; ++t) threads.emplace_back(run, t);
    for (auto& th : threads) th.join();
    Result<StepResult> total = SumTowers(results);  // a tower's own error comes first
    if (total.ok() && !reduce_status.ok()) return reduce_status;
    return total;
#else
    return InternalError("device reduction without CUDA");
#endif
  }

  // The step's result over all towers: the mean loss, the examples right and seen; the first
  // tower's error if one failed.
  static Result<StepResult> SumTowers(const std::vector<Result<StepResult>>& results) {
    StepResult total;
    for (const auto& r : results) {
      if (!r.ok()) return r.status();
      total.loss += r->loss / static_cast<double>(results.size());
      total.correct += r->correct;
      total.batch += r->batch;
    }
    return total;
  }

  // Runs every tower on its slice; each variable's averaged gradient is pushed as soon as the
  // last tower has produced it.
  Result<StepResult> ComputeAndPush(const Batch& batch, const std::vector<int64_t>& versions,
                                    int64_t clock) {
    if (reduce_.enabled) return ComputeAndPushOnDevice(batch, versions, clock);
    const int k = static_cast<int>(towers_.size());
    const int slice = batch.size / k;
    const int64_t example = NumElements(batcher_->example_shape());
    for (int v = 0; v < num_vars_; ++v) done_[v].store(0);
    auto on_gradient = [&](int v) {
      if (done_[v].fetch_add(1) + 1 != k) return;
      float* out = avg_[v].f32();
      const int64_t n = avg_[v].num_elements();
      if (k == 1) {
        std::memcpy(out, towers_[0].model->gradient(v).data(), n * sizeof(float));
      } else {
        std::vector<const float*> in;
        for (Tower& t : towers_) in.push_back(t.model->gradient(v).data());
        kernels::cpu::AverageOf(k, in.data(), n, out);  // tower order: reproducible
      }
      pushes_[v] = client_->Push(v, versions[v], clock, avg_[v]);
    };
    std::vector<Result<StepResult>> results(k, StepResult{});
    auto run = [&](int i) {
      results[i] = towers_[i].model->TrainStep(batch.x.data() + i * slice * example,
                                               batch.labels.data() + i * slice, slice, on_gradient);
    };
    if (k == 1) {
      run(0);
    } else {
      std::vector<std::thread> threads;
      for (int i = 0; i < k; ++i) threads.emplace_back(run, i);
      for (auto& t : threads) t.join();
    }
    return SumTowers(results);
  }

  // Waits for this step's pushes; returns their mean staleness.
  Result<double> WaitPushes() {
    double staleness = 0;
    for (int v = 0; v < num_vars_; ++v) {
      TOWERPS_ASSIGN_OR_RETURN(ps::PushReport r, Await(pushes_[v]));
      staleness += r.mean_staleness / num_vars_;
    }
    return staleness;
  }

  void LogPlacement() {
    const Model<float>& m = *towers_[0].model;
    for (size_t t = 0; t < towers_.size(); ++t) {
      for (const auto& layer : towers_[t].model->layers()) {
        TOWERPS_LOG(kInfo) << "placement: tower " << t << " " << layer->name() << " ("
                           << layer->ops() << ") -> " << towers_[t].device.name() << " ["
                           << towers_[t].backend->name() << " backend]";
      }
    }
    TOWERPS_LOG(kInfo) << "placement: variable chunks:\n"
                       << client_->placement().Describe(m.variables());
  }

  // GPU towers: the caching allocator's peak and reservation.
  void LogDeviceMemory() {
#ifdef TOWERPS_WITH_CUDA
    for (size_t t = 0; t < towers_.size(); ++t) {
      const auto* gpu = dynamic_cast<const kernels::CudaBackend*>(towers_[t].backend.get());
      if (gpu == nullptr) continue;
      const kernels::cuda::AllocatorStats m = gpu->memory_stats();
      TOWERPS_LOG(kInfo) << "tower " << t << " " << gpu->name() << " memory: peak "
                         << (m.peak_bytes_in_use >> 20) << " MiB in use, "
                         << (m.bytes_reserved >> 20) << " MiB reserved of " << (m.limit_bytes >> 20)
                         << " MiB allowed";
    }
#endif
  }

  void Progress(int64_t step_in_epoch, int64_t epoch) {
    if (!tty_) return;
    const int width = 30;
    const int filled = static_cast<int>(width * step_in_epoch / steps_per_epoch_);
    std::printf("\repoch %lld [%s%s] %lld/%lld", static_cast<long long>(epoch + 1),
                std::string(filled, '=').c_str(), std::string(width - filled, ' ').c_str(),
                static_cast<long long>(step_in_epoch), static_cast<long long>(steps_per_epoch_));
    std::fflush(stdout);
  }

  // Format: per variable a line "<name> <elements>\n" followed by that many float32 values.
  Status WriteFinalParams() {
    const std::string path = ExpandRank(o_.worker.final_params_out, o_.rank);
    std::ofstream out(path, std::ios::binary);
    const Model<float>& m = *towers_[0].model;
    for (int v = 0; v < num_vars_; ++v) {
      Tensor t = m.GetVariable(v);
      out << m.variables()[v].name << " " << t.num_elements() << "\n";
      out.write(static_cast<const char*>(t.raw_data()),
                static_cast<std::streamsize>(t.byte_size()));
    }
    if (!out) return IoError("--final-params-out " + path + ": write failed");
    return Status::Ok();
  }

  TrainerOptions o_;
  std::vector<Tower> towers_;
  JobData data_;
  std::unique_ptr<Batcher> batcher_, test_batcher_;
  std::unique_ptr<ps::Client> client_;
  int num_vars_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t start_version_ = -1;
  std::vector<Tensor> avg_;  // averaged gradients, sent zero-copy: untouched until pushed
  struct DeviceReduction {
    bool enabled = false;
    std::vector<std::vector<kernels::BackendBuffer<float>>> scratch;  // [v][tower - 1], GPU 0
    std::vector<kernels::BackendBuffer<float>> average;               // [v], GPU 0
    std::mutex mu;
    std::condition_variable cv;
    std::vector<std::vector<char>> queued;  // [tower][v]: backward queued; GUARDED_BY(mu)
    bool failed = false;                    // a tower's step failed; GUARDED_BY(mu)
  } reduce_;
  std::unique_ptr<std::atomic<int>[]> done_;  // per variable: towers finished this step
  std::vector<std::future<Result<ps::PushReport>>> pushes_;
  std::vector<std::future<Result<ps::PulledVariable>>> pulls_;
  MetricsLog metrics_;
  bool tty_ = false;  // stdout is a terminal: progress bars
  StragglerPlan plan_;
  double total_wait_ = 0;   // seconds spent waiting for parameters (the barrier, in sync)
  double total_delay_ = 0;  // seconds of injected delay
};

Result<std::unique_ptr<Trainer>> Trainer::Create(TrainerOptions options) {
  TOWERPS_RETURN_IF_ERROR(options.job.Validate());
  TOWERPS_RETURN_IF_ERROR(options.worker.Validate());
  if (static_cast<int>(options.ps_endpoints.size()) != options.job.servers) {
    return InvalidArgumentError("--ps-endpoints lists " +
                                std::to_string(options.ps_endpoints.size()) +
                                " servers but --servers=" + std::to_string(options.job.servers));
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  TOWERPS_RETURN_IF_ERROR(impl->Setup());
  return std::unique_ptr<Trainer>(new Trainer(std::move(impl)));
}

Trainer::Trainer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Trainer::~Trainer() = default;
Result<TrainingSummary> Trainer::Run() { return impl_->Run(); }

std::string SummaryJson(const TrainingSummary& s, const ps::JobConfig& job, int rank) {
  char buf[1024];
  std::snprintf(
      buf, sizeof(buf),
      "{\"test_accuracy\":%s,\"test_loss\":%s,\"final_train_loss\":%s,"
      "\"train_seconds\":%.3f,\"examples_per_sec\":%.1f,\"steps\":%lld,\"epochs\":%d,"
      "\"mode\":\"%s\",\"workers\":%d,\"servers\":%d,\"replicas_to_aggregate\":%d,"
      "\"staleness_bound\":%d,\"model\":\"%s\",\"batch_size\":%d,\"dropped_stale\":%llu,"
      "\"updates_applied\":%llu,\"mean_staleness\":%.4f,\"p99_staleness\":%.1f,"
      "\"rank\":%d}",
      JsonNumber(s.test_accuracy, "%.6f").c_str(), JsonNumber(s.test_loss, "%.6f").c_str(),
      JsonNumber(s.final_train_loss, "%.6f").c_str(), s.train_seconds, s.examples_per_sec,
      static_cast<long long>(s.steps), s.epochs, ps::UpdateModeName(job.mode), job.workers,
      job.servers, job.EffectiveReplicas(), job.staleness, job.model.c_str(), job.batch_size,
      static_cast<unsigned long long>(s.dropped_stale),
      static_cast<unsigned long long>(s.updates_applied), s.mean_staleness, s.p99_staleness, rank);
  std::string out = buf;
  out.pop_back();  // the closing brace
  char more[128];
  std::snprintf(more, sizeof(more), ",\"wait_seconds\":%.3f,\"injected_delay_seconds\":%.3f",
                s.wait_seconds, s.injected_delay_seconds);
  out += more;
  out += ",\"staleness_histogram\":[";
  for (size_t i = 0; i < s.staleness_histogram.size(); ++i) {
    out += (i ? "," : "") + std::to_string(s.staleness_histogram[i]);
  }
  return out + "]}";
}

}  // namespace towerps::worker
