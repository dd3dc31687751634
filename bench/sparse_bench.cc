#include "bench/sparse_bench.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <unordered_set>
#include <vector>

#include "bench/proc_memory.h"
#include "bench/server_processes.h"
#include "common/zipf.h"
#include "job/row_batch.h"
#include "ps/client/client.h"

namespace towerps::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kSignature = 0x5a55e;

// `o.batches` steps of `o.unique_ids` distinct ids each, deduplicated for `partitions`.
std::vector<ps::UniqueIds> MakeBatches(const SparseBenchOptions& o, int worker, int partitions) {
  std::mt19937_64 rng(static_cast<uint64_t>(worker) * 7919 + 1);
  ZipfSampler zipf(o.id_space, o.zipf_exponent);
  std::uniform_int_distribution<int64_t> uniform(0, o.id_space - 1);
  std::vector<ps::UniqueIds> batches;
  for (int b = 0; b < o.batches; ++b) {
    std::unordered_set<uint64_t> seen;
    std::vector<uint64_t> ids;
    while (static_cast<int64_t>(ids.size()) < o.unique_ids) {
      const int64_t k = o.distribution == "zipf" ? zipf.Sample(rng) - 1 : uniform(rng);
      if (seen.insert(static_cast<uint64_t>(k)).second) ids.push_back(static_cast<uint64_t>(k));
    }
    batches.push_back(ps::Deduplicate(ids, partitions));
  }
  return batches;
}

std::vector<ps::VariableSpec> Variables(const SparseBenchOptions& o) {
  if (o.dense) return {{"table", {o.id_space, o.dim}}};
  return {ps::TableVariable("table", o.table_rows, o.dim, 0.01f)};
}

// What every worker thread shares.
struct Run {
  std::atomic<int> ready{0};
  std::atomic<bool> measuring{false};
  std::atomic<bool> stop{false};
  std::atomic<long> steps{0};
};

// One worker's steps, from `step`: the batch's rows pulled, their gradients pushed. Separate:
// a pull, then a push, each waited for. Combined: each push carries the next batch's pull
// (Client::PushThenPull), as a worker sends them: one request per partition and step.
class SparseSteps {
 public:
  SparseSteps(ps::Client& client, const std::vector<ps::UniqueIds>& batches, Tensor grads,
              bool separate)
      : client_(client), batches_(batches), grads_(std::move(grads)), separate_(separate) {}

  Status Step(int64_t step) {
    const ps::UniqueIds& batch = batches_[static_cast<size_t>(step) % batches_.size()];
    if (separate_ || !next_.valid()) {
      next_ = client_.Pull({.variable_id = 0, .ids = batch.ids, .clock = step});
    }
    TOWERPS_ASSIGN_OR_RETURN(ps::PulledVariable rows, next_.get());
    const ps::PushRequest push{.variable_id = 0,
                               .version = rows.version,
                               .clock = step,
                               .gradient = grads_,
                               .ids = batch.ids,
                               .pulled_updates = rows.updates};
    if (separate_) return client_.Push(push).get().status();
    const ps::UniqueIds& following = batches_[static_cast<size_t>(step + 1) % batches_.size()];
    ps::Client::PushAndPull both =
        client_.PushThenPull(push, {.variable_id = 0, .ids = following.ids, .clock = step + 1});
    next_ = std::move(both.pull);
    return both.push.get().status();
  }

 private:
  ps::Client& client_;
  const std::vector<ps::UniqueIds>& batches_;
  const Tensor grads_;
  const bool separate_;
  Future<Result<ps::PulledVariable>> next_;
};

// The same table pushed and pulled whole, as a dense variable.
Status DenseStep(ps::Client& client, const Tensor& grad, int64_t clock) {
  ps::Client::PushAndPull both =
      client.PushThenPull({.variable_id = 0, .version = 0, .clock = clock, .gradient = grad},
                          {.variable_id = 0, .min_version = 0, .clock = clock + 1});
  TOWERPS_RETURN_IF_ERROR(both.push.get().status());
  return both.pull.get().status();
}

Status Worker(const SparseBenchOptions& o, const ps::JobConfig& job, const ServerProcesses& servers,
              int rank, Run* run) {
  ps::ClientOptions co;
  co.servers = servers.endpoints;
  co.worker_rank = rank;
  co.job = job;
  co.rpc_timeout = std::chrono::seconds(60);
  co.transport.security = servers.security;
  co.transport.path = *ParseTransportPath(o.transport);
  TOWERPS_ASSIGN_OR_RETURN(auto client, ps::Client::Connect(co));
  TOWERPS_RETURN_IF_ERROR(client->Register(Variables(o), kSignature).get().status());
  const std::vector<ps::UniqueIds> batches = MakeBatches(o, rank, job.TablePartitions());
  Tensor grads = client->Allocate(o.dense ? Shape{o.id_space * o.dim} : Shape{o.unique_ids, o.dim});
  for (int64_t i = 0; i < grads.num_elements(); ++i) grads.f32()[i] = 1e-3f * (i % 7 - 3);
  if (o.dense && rank == 0) TOWERPS_RETURN_IF_ERROR(client->Init(0, grads).get());
  SparseSteps sparse(*client, batches, o.dense ? grads : grads.Reshape({o.unique_ids, o.dim}),
                     o.separate_pull);
  run->ready.fetch_add(1);
  for (int64_t step = 0; !run->stop.load() && (o.steps == 0 || step < o.steps); ++step) {
    TOWERPS_RETURN_IF_ERROR(o.dense ? DenseStep(*client, grads, step) : sparse.Step(step));
    if (run->measuring.load()) run->steps.fetch_add(1);
  }
  return Status::Ok();
}

Result<ps::JobConfig> SparseJob(const SparseBenchOptions& o) {
  if (o.servers < 1 || o.workers < 1 || o.dim < 1 || o.unique_ids < 1 || !(o.seconds > 0) ||
      o.id_space < o.unique_ids) {
    return InvalidArgumentError(
        "need --servers, --workers, --dim, --unique-ids >= 1, --seconds > 0 and --ids at least "
        "--unique-ids");
  }
  if (o.distribution != "zipf" && o.distribution != "uniform") {
    return InvalidArgumentError("--id-distribution " + o.distribution + ": use uniform or zipf");
  }
  if (!(o.zipf_exponent > 0)) return InvalidArgumentError("--zipf-exponent must be positive");
  if (o.transport != "tcp" && o.transport != "shm") {
    return InvalidArgumentError("--transport " + o.transport + ": use tcp, shm or both");
  }
  if (o.batches < 1) return InvalidArgumentError("--batches must be at least 1");
  if (o.table_rows < 0 || (o.table_rows > 0 && o.table_rows < o.id_space) || o.steps < 0) {
    return InvalidArgumentError(
        "--table-rows must be 0 (unbounded) or at least --ids, and "
        "--steps >= 0");
  }
  ps::JobConfig job;
  job.mode = ps::UpdateMode::kAsync;
  job.servers = o.servers;
  job.workers = o.workers;
  job.table_partitions = o.table_partitions;
  job.optimizer.kind = ps::OptimizerKind::kSgd;
  job.optimizer.learning_rate = 1e-3f;
  job.schedule.kind = ps::LrScheduleKind::kConstant;
  TOWERPS_ASSIGN_OR_RETURN(job.table_optimizer.kind,
                           ps::kTableOptimizerKinds.Parse(o.table_optimizer));
  job.table_optimizer.learning_rate = 1e-3f;
  job.table_policies.defaults.admission_min_count = o.admission_min_count;
  job.table_policies.defaults.ttl_steps = o.ttl_steps;
  job.table_policies.defaults.capacity_rows = o.capacity_rows;
  TOWERPS_ASSIGN_OR_RETURN(job.table_policies.defaults.storage,
                           ps::kTableStorages.Parse(o.table_storage));
  job.table_policies.defaults.memory_mb = static_cast<float>(o.table_memory_mb);
  TOWERPS_RETURN_IF_ERROR(job.Validate());
  return job;
}

// What the servers report, summed: bytes received and sent so far, rows held, and the disk
// tier's counts.
struct ServerTotals {
  uint64_t bytes = 0, rows = 0, rows_on_disk = 0, row_reads = 0, disk_reads = 0, disk_hits = 0,
           disk_writes = 0;
};

Result<ServerTotals> Totals(const SparseBenchOptions& o, const ps::JobConfig& job,
                            const ServerProcesses& servers) {
  ps::ClientOptions co;
  co.servers = servers.endpoints;
  co.identity = "tool:sparse-bench";  // not worker 0's: its replies stay its own
  co.job = job;
  co.transport.security = servers.security;
  TOWERPS_ASSIGN_OR_RETURN(auto client, ps::Client::Connect(co));
  ServerTotals t;
  for (int s = 0; s < o.servers; ++s) {
    TOWERPS_ASSIGN_OR_RETURN(ps::ServerStatsReport r, client->Stats(s).get());
    t.bytes += r.bytes_in + r.bytes_out;
    t.rows += r.table_rows;
    t.rows_on_disk += r.table_rows_on_disk;
    t.row_reads += r.table_row_reads;
    t.disk_reads += r.table_disk_reads;
    t.disk_hits += r.table_disk_hits;
    t.disk_writes += r.table_disk_writes;
  }
  return t;
}

// This process's CPU seconds so far (to the nanosecond: a short run's client may use less than
// /proc's 10 ms tick), then each server's (0 for one that is gone).
std::vector<double> CpuSeconds(const ServerProcesses& servers) {
  timespec self{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &self);
  std::vector<double> seconds = {static_cast<double>(self.tv_sec) +
                                 1e-9 * static_cast<double>(self.tv_nsec)};
  for (const Subprocess& p : servers.processes) {
    seconds.push_back(ProcCpuSeconds(p.pid()).value_or(0));
  }
  return seconds;
}

// The disk tier's figures over the measured `steps` (each worker's), from the servers' totals.
void AddTier(const ServerTotals& before, const ServerTotals& after, double steps,
             SparseBenchResult* res) {
  steps = std::max(1.0, steps);
  res->rows_on_disk = after.rows_on_disk;
  res->memory_hit_rate =
      ps::MemoryHitRate(after.row_reads - before.row_reads, after.disk_hits - before.disk_hits);
  res->disk_reads_per_step = static_cast<double>(after.disk_reads - before.disk_reads) / steps;
  res->disk_writes_per_step = static_cast<double>(after.disk_writes - before.disk_writes) / steps;
}

}  // namespace

Result<SparseBenchResult> RunSparseBench(const SparseBenchOptions& o) {
  TOWERPS_ASSIGN_OR_RETURN(const ps::JobConfig job, SparseJob(o));
  ServerProcesses servers;
  if (o.progress) std::fprintf(stderr, "starting %d server(s)...\n", o.servers);
  TOWERPS_RETURN_IF_ERROR(StartServerProcesses({.servers = o.servers,
                                                .threads = o.server_threads,
                                                .binary = o.server_binary,
                                                .security = o.security,
                                                .transport = o.transport,
                                                .table_dir = o.table_dir},
                                               job, &servers));
  Run run;
  std::vector<Status> status(static_cast<size_t>(o.workers));
  std::vector<std::thread> threads;
  for (int r = 0; r < o.workers; ++r) {
    threads.emplace_back([&, r] {
      status[static_cast<size_t>(r)] = Worker(o, job, servers, r, &run);
      if (!status[static_cast<size_t>(r)].ok()) run.stop.store(true);  // the others stop too
    });
  }
  const auto setup = Deadline::After(std::chrono::seconds(60));
  while (run.ready.load() < o.workers && !run.stop.load() && !setup.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Warm-up, unless every step counts (--steps).
  if (o.steps == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  if (o.progress) std::fprintf(stderr, "measuring for %.1f s...\n", o.seconds);
  Result<ServerTotals> before = Totals(o, job, servers);
  const std::vector<double> cpu_before = CpuSeconds(servers);
  run.measuring.store(true);
  const auto t0 = Clock::now();
  if (o.steps == 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  // The workers stop, and the steps they were in finish and count, before the servers' totals
  // are read: the bytes measured are those of the steps counted (and the next step's pull a
  // push carried), however slow a step is.
  if (o.steps == 0) run.stop.store(true);
  for (auto& t : threads) t.join();
  run.measuring.store(false);
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  const std::vector<double> cpu_after = CpuSeconds(servers);
  Result<ServerTotals> after = Totals(o, job, servers);
  for (int r = 0; r < o.workers; ++r) {
    TOWERPS_RETURN_IF_ERROR(
        status[static_cast<size_t>(r)].WithContext("worker " + std::to_string(r)));
  }
  if (run.ready.load() < o.workers) return TimeoutError("workers did not start within 60 s");
  TOWERPS_RETURN_IF_ERROR(before.status());
  TOWERPS_RETURN_IF_ERROR(after.status());

  SparseBenchResult res;
  res.steps = run.steps.load();
  res.rows_per_sec = static_cast<double>(res.steps * o.unique_ids) / elapsed;
  res.step_ms = res.steps ? 1e3 * elapsed * o.workers / static_cast<double>(res.steps) : 0;
  // The stats requests add a few hundred bytes each: nothing at this scale.
  res.bytes_per_step =
      res.steps ? static_cast<double>(after->bytes - before->bytes) / res.steps : 0;
  res.ideal_bytes_per_step = 2.0 * static_cast<double>(o.unique_ids) * (8.0 + 4.0 * o.dim);
  res.bytes_over_ideal = res.bytes_per_step / res.ideal_bytes_per_step;
  res.table_rows = after->rows;
  AddTier(*before, *after, static_cast<double>(res.steps) / o.workers, &res);
  for (const Subprocess& p : servers.processes) {
    res.server_rss_mib += static_cast<double>(ProcStatusKib(p.pid(), "VmRSS").value_or(0)) / 1024;
    res.server_peak_rss_mib =
        std::max(res.server_peak_rss_mib,
                 static_cast<double>(ProcStatusKib(p.pid(), "VmHWM").value_or(0)) / 1024);
  }
  res.workers_peak_rss_mib =
      static_cast<double>(ProcStatusKib(getpid(), "VmHWM").value_or(0)) / 1024;
  const double million_rows = static_cast<double>(res.steps * o.unique_ids) / 1e6;
  if (million_rows > 0) {
    res.client_cpu_s_per_million_rows = (cpu_after[0] - cpu_before[0]) / million_rows;
    for (size_t s = 1; s < cpu_after.size(); ++s) {
      res.server_cpu_s_per_million_rows.push_back((cpu_after[s] - cpu_before[s]) / million_rows);
    }
  }
  return res;
}

}  // namespace towerps::bench
