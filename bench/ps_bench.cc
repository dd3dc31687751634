#include "bench/ps_bench.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>
#include <vector>

#include "bench/server_processes.h"
#include "common/internal/raw_ceiling.h"
#include "ps/client/client.h"

namespace towerps::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The servers' time in updates per round (one update per chunk and step), from their stats.
Result<double> ServerUpdateMs(ps::Client& client, int chunks) {
  uint64_t nanos = 0, updates = 0;
  for (int s = 0; s < client.num_servers(); ++s) {
    TOWERPS_ASSIGN_OR_RETURN(ps::ServerStatsReport r, client.Stats(s).get());
    nanos += r.aggregation_nanos;
    updates += r.updates_applied;
  }
  return updates ? 1e-6 * static_cast<double>(nanos) * chunks / updates : 0.0;
}

// Worker `rank`'s client, over o.transport.
Result<std::unique_ptr<ps::Client>> ConnectWorker(const PsBenchOptions& o, const ps::JobConfig& job,
                                                  const std::vector<std::string>& endpoints,
                                                  const TransportSecurity& security, int rank) {
  ps::ClientOptions co;
  co.servers = endpoints;
  co.worker_rank = rank;
  co.job = job;
  co.rpc_timeout = std::chrono::seconds(30);
  co.transport.security = security;
  co.transport.path = *ParseTransportPath(o.transport);
  return ps::Client::Connect(co);
}

// One worker: registers, (chief) initialises, waits for the values, then runs rounds until
// `stop_at`.
Status WorkerLoop(const PsBenchOptions& o, const ps::JobConfig& job,
                  const std::vector<std::string>& endpoints, const TransportSecurity& security,
                  int rank, std::atomic<int>* registered, const std::atomic<bool>* measuring,
                  const std::atomic<int64_t>* stop_at, std::atomic<int64_t>* current, long* trips,
                  double* update_ms) {
  TOWERPS_ASSIGN_OR_RETURN(auto client, ConnectWorker(o, job, endpoints, security, rank));
  const int64_t floats = static_cast<int64_t>(o.chunk_bytes / 4);
  std::vector<ps::VariableSpec> vars;
  for (int k = 0; k < o.chunks; ++k) vars.push_back({"v" + std::to_string(k), {floats}});
  TOWERPS_RETURN_IF_ERROR(client->Register(vars, 1).get().status());
  // As a worker's averaged gradients: in the client's arena (the heap over TCP). One buffer
  // pushed every round: the servers only read it.
  Tensor grad = client->Allocate({floats});
  for (int64_t i = 0; i < floats; ++i) grad.f32()[i] = 1e-6f * static_cast<float>(i % 97);
  if (rank == 0) {
    for (int k = 0; k < o.chunks; ++k) TOWERPS_RETURN_IF_ERROR(client->Init(k, grad).get());
  }
  // As a real worker does: wait for the chief's initial values before the first push.
  for (int k = 0; k < o.chunks; ++k)
    TOWERPS_RETURN_IF_ERROR(
        client->Pull({.variable_id = static_cast<uint32_t>(k), .min_version = 0, .clock = 0})
            .get()
            .status());
  registered->fetch_add(1);
  // Each chunk runs its own pipeline, as a worker's layers do: as soon as a chunk's pull for
  // version t + 1 returns, its gradient for step t + 1 goes out with the pull for t + 2. Sync
  // steps need every worker, so all workers stop at the same step: stop_at.
  std::vector<int64_t> step(o.chunks, 0);
  std::vector<Future<Result<ps::PushReport>>> pushes(o.chunks);
  std::vector<Future<Result<ps::PulledVariable>>> pulls(o.chunks);
  // A chunk's push for step t and its pull for t + 1: one request, or two with separate_pull.
  auto push_and_pull = [&](int k, int64_t t) {
    if (o.separate_pull) {
      pushes[k] = client->Push(
          {.variable_id = static_cast<uint32_t>(k), .version = t, .clock = t, .gradient = grad});
      pulls[k] = client->Pull(
          {.variable_id = static_cast<uint32_t>(k), .min_version = t + 1, .clock = t + 1});
      return;
    }
    ps::Client::PushAndPull both = client->PushThenPull(
        {.variable_id = static_cast<uint32_t>(k), .version = t, .clock = t, .gradient = grad},
        {.variable_id = static_cast<uint32_t>(k), .min_version = t + 1, .clock = t + 1});
    pushes[k] = std::move(both.push);
    pulls[k] = std::move(both.pull);
  };
  for (int k = 0; k < o.chunks; ++k) push_and_pull(k, 0);
  for (int64_t done = 0;; ++done) {
    const int k = static_cast<int>(done % o.chunks);
    TOWERPS_RETURN_IF_ERROR(pushes[k].get().status());
    TOWERPS_RETURN_IF_ERROR(pulls[k].get().status());
    const int64_t t = ++step[k];
    if (measuring->load()) ++*trips;
    if (k == 0) current->store(t);
    if (t >= stop_at->load()) {
      // Finish the other chunks' outstanding work up to the same step, then stop.
      for (int j = 0; j < o.chunks; ++j) {
        if (j == k) continue;
        TOWERPS_RETURN_IF_ERROR(pushes[j].get().status());
        TOWERPS_RETURN_IF_ERROR(pulls[j].get().status());
        for (int64_t u = ++step[j]; u < t; u = ++step[j]) {
          push_and_pull(j, u);
          TOWERPS_RETURN_IF_ERROR(pushes[j].get().status());
          TOWERPS_RETURN_IF_ERROR(pulls[j].get().status());
        }
      }
      break;
    }
    push_and_pull(k, t);
  }
  if (rank == 0) {
    TOWERPS_ASSIGN_OR_RETURN(*update_ms, ServerUpdateMs(*client, o.chunks));
  }
  return Status::Ok();
}

// The benchmark's job: sync SGD over o.chunks chunks of o.chunk_bytes; the options checked.
Result<ps::JobConfig> PsBenchJob(const PsBenchOptions& o) {
  if (o.servers < 1 || o.workers < 1 || o.chunks < 1 || o.chunk_bytes < 4 ||
      o.chunk_bytes % 4 != 0 || !(o.seconds > 0)) {
    return InvalidArgumentError(
        "need --servers, --workers, --chunks >= 1, --chunk-bytes a positive multiple of 4 and "
        "--seconds > 0");
  }
  if (o.security != "none" && o.security != "auth" && o.security != "encrypt") {
    return InvalidArgumentError("--security " + o.security + ": use none, auth or encrypt");
  }
  if (o.transport != "tcp" && o.transport != "shm") {
    return InvalidArgumentError("--transport " + o.transport + ": use tcp, shm or both");
  }
  ps::JobConfig job;
  job.servers = o.servers;
  job.workers = o.workers;
  job.partition_bytes = o.chunk_bytes;
  job.optimizer.kind = ps::OptimizerKind::kSgd;
  job.optimizer.learning_rate = 1e-6f;
  return job;
}

}  // namespace

Result<PsBenchResult> RunPsBench(const PsBenchOptions& o) {
  TOWERPS_ASSIGN_OR_RETURN(const ps::JobConfig job, PsBenchJob(o));
  ServerProcesses servers;
  if (o.progress) std::fprintf(stderr, "starting %d server(s)...\n", o.servers);
  TOWERPS_RETURN_IF_ERROR(StartServerProcesses({.servers = o.servers,
                                                .threads = o.server_threads,
                                                .binary = o.server_binary,
                                                .security = o.security,
                                                .transport = o.transport,
                                                .table_dir = ""},
                                               job, &servers));

  std::atomic<int> registered{0};
  std::atomic<bool> measuring{false};
  std::atomic<int64_t> stop_at{INT64_MAX};
  std::vector<std::atomic<int64_t>> current(o.workers);
  std::vector<long> rounds(o.workers, 0);
  std::vector<Status> status(o.workers);
  double update_ms = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < o.workers; ++r) {
    threads.emplace_back([&, r] {
      status[r] = WorkerLoop(o, job, servers.endpoints, servers.security, r, &registered,
                             &measuring, &stop_at, &current[r], &rounds[r], &update_ms);
      if (!status[r].ok()) stop_at.store(0);
    });
  }
  const auto setup_deadline = Deadline::After(std::chrono::seconds(30));
  while (registered.load() < o.workers && stop_at.load() != 0 && !setup_deadline.expired()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // warm-up
  if (o.progress) std::fprintf(stderr, "measuring PS goodput for %.1f s...\n", o.seconds);
  measuring.store(true);
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  measuring.store(false);
  const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  int64_t furthest = 0;
  for (auto& c : current) furthest = std::max(furthest, c.load());
  // No chunk of any worker can be more than one step ahead of another worker's in sync mode.
  if (stop_at.load() != 0) stop_at.store(furthest + 2);
  for (auto& t : threads) t.join();
  for (int r = 0; r < o.workers; ++r) {
    TOWERPS_RETURN_IF_ERROR(status[r].WithContext("worker " + std::to_string(r)));
  }
  if (registered.load() < o.workers) return TimeoutError("workers did not register within 30 s");

  PsBenchResult res;
  long trips = 0;  // chunk push+pull round trips, all workers
  for (int r = 0; r < o.workers; ++r) trips += rounds[r];
  res.goodput_gbps =
      static_cast<double>(trips) * static_cast<double>(o.chunk_bytes) / elapsed / 1e9;
  res.rounds = trips / o.chunks;
  // Mean time one worker takes for a round of all its chunks.
  res.round_ms = res.rounds ? 1e3 * elapsed * o.workers / static_cast<double>(res.rounds) : 0;
  res.server_update_ms = update_ms;
  servers.processes.clear();  // stop servers before measuring the ceiling on the same cores
  if (!o.ceilings) return res;

  if (o.progress) std::fprintf(stderr, "measuring raw ZeroMQ for %.1f s...\n", o.seconds);
  internal::RawCeilingOptions t;
  t.message_bytes = o.chunk_bytes;
  t.seconds = o.seconds;
  long messages = 0;
  TOWERPS_ASSIGN_OR_RETURN(res.raw_zmq_gbps, internal::RawZmqThroughput(t, &messages));
  res.ratio = res.goodput_gbps / res.raw_zmq_gbps;
  if (o.progress) std::fprintf(stderr, "measuring raw ZeroMQ echo for %.1f s...\n", o.seconds);
  TOWERPS_ASSIGN_OR_RETURN(res.raw_zmq_echo_gbps,
                           internal::RawZmqEchoThroughput(t, o.chunks, &messages));
  res.echo_ratio = res.goodput_gbps / res.raw_zmq_echo_gbps;
  return res;
}

double MemcpyGbps(size_t bytes, int buffers, double seconds) {
  std::vector<Tensor> src, dst;
  const int64_t n = static_cast<int64_t>(bytes / 4);
  for (int i = 0; i < buffers; ++i) {
    src.push_back(Tensor::Empty({n}));
    dst.push_back(Tensor::Empty({n}));
    for (int64_t j = 0; j < n; ++j) src.back().f32()[j] = static_cast<float>(j % 89);
    std::memset(dst.back().raw_data(), 0, bytes);
  }
  const auto start = Clock::now();
  long copies = 0;
  double elapsed = 0;
  do {
    for (int i = 0; i < buffers; ++i) std::memcpy(dst[i].raw_data(), src[i].raw_data(), bytes);
    copies += buffers;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return static_cast<double>(copies) * static_cast<double>(bytes) / elapsed / 1e9;
}

}  // namespace towerps::bench
