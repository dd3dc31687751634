#include "worker/train/join_job.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/logging.h"

namespace towerps::worker {
namespace {

// One pull of every variable, at `version` (exactly, or at least).
std::vector<Future<Result<ps::PulledVariable>>> PullAll(ps::Client& client, int num_vars,
                                                        int64_t version, bool exact) {
  std::vector<Future<Result<ps::PulledVariable>>> pulls;
  for (int v = 0; v < num_vars; ++v)
    pulls.push_back(client.Pull({.variable_id = static_cast<uint32_t>(v),
                                 .min_version = version,
                                 .clock = 0,
                                 .exact = exact}));
  return pulls;
}

// Where every chunk and table partition stands, at `version` (exactly, or at least): the lowest
// and highest versions, and this worker's lowest clock.
struct Standing {
  int64_t lowest = INT64_MAX, highest = -1, clock = -1;
};

Result<Standing> Probe(ps::Client& client, int num_vars, const std::vector<uint32_t>& tables,
                       int64_t version, bool exact, const std::atomic<bool>* stop) {
  auto pulls = PullAll(client, num_vars, version, exact);
  std::vector<Future<Result<ps::PulledVariable>>> probes;
  for (uint32_t t : tables) {
    probes.push_back(client.Pull({.variable_id = t,
                                  .ids = Tensor::Empty({0}, DType::kUInt64),
                                  .min_version = version,
                                  .exact = exact}));
  }
  Standing at;
  auto add = [&at](int64_t lowest, int64_t highest, int64_t clock) {
    at.lowest = std::min(at.lowest, lowest);
    at.highest = std::max(at.highest, highest);
    at.clock = at.clock < 0 ? clock : std::min(at.clock, clock);
  };
  for (auto& pull : pulls) {
    TOWERPS_ASSIGN_OR_RETURN(const ps::PulledVariable p, AwaitUnlessStopped(pull, stop));
    add(p.version, p.max_version, p.min_clock);
  }
  for (auto& probe : probes) {
    TOWERPS_ASSIGN_OR_RETURN(const ps::PulledVariable p, AwaitUnlessStopped(probe, stop));
    add(p.version, p.max_version, p.min_clock);
  }
  return at;
}

}  // namespace

Result<SyncJoin> JoinSyncJob(ps::Client& client, int num_vars, const std::vector<uint32_t>& tables,
                             int64_t first, bool full_sync, const std::atomic<bool>* stop) {
  TOWERPS_ASSIGN_OR_RETURN(const Standing at,
                           Probe(client, num_vars, tables, first, /*exact=*/false, stop));
  const int64_t lowest = at.lowest, highest = at.highest;
  SyncJoin join{lowest, full_sync};
  if (lowest > first) {
    TOWERPS_LOG(kInfo) << "joining a running job at step " << lowest
                       << (highest > lowest ? " (recomputing it: the chunks this worker's "
                                              "predecessor pushed to are at step " +
                                                  std::to_string(highest) + ")"
                                            : "");
  }
  if (!join.exact || highest == lowest) return join;
  Result<Standing> exact = Probe(client, num_vars, tables, lowest, /*exact=*/true, stop);
  if (exact.ok()) return join;
  if (exact.status().code() != StatusCode::kFailedPrecondition) return exact.status();
  TOWERPS_LOG(kWarning) << "step " << lowest << " cannot be recomputed bit for bit ("
                        << exact.status().message() << "); going on from the latest values";
  join.exact = false;
  return join;
}

Result<int64_t> JoinAsyncJob(ps::Client& client, int num_vars, const std::vector<uint32_t>& tables,
                             int64_t first, const std::atomic<bool>* stop) {
  TOWERPS_ASSIGN_OR_RETURN(const Standing at,
                           Probe(client, num_vars, tables, first, /*exact=*/false, stop));
  const int64_t iter = std::max<int64_t>(at.clock, 0);
  if (iter > 0) TOWERPS_LOG(kInfo) << "joining a running job at iteration " << iter;
  return iter;
}

Result<std::unique_ptr<ps::Client>> ConnectToServers(const ServerAccess& access) {
  ps::ClientOptions co;
  co.servers = access.endpoints;
  co.worker_rank = access.rank;
  co.rpc_timeout = access.rpc_timeout;
  co.job = access.job;
  co.transport.security = access.security;
  co.transport.path = access.path;
  return ps::Client::Connect(std::move(co));
}

Result<int64_t> RegisterModel(ps::Client& client, const std::vector<ps::VariableSpec>& variables,
                              uint64_t signature, int rank, int dense,
                              const std::function<Tensor(int v)>& initial,
                              const std::atomic<bool>* stop) {
  auto registered = client.Register(variables, signature);
  TOWERPS_ASSIGN_OR_RETURN(const int64_t restored, AwaitUnlessStopped(registered, stop));
  if (rank != 0 || restored != ps::kNoVersion) return restored;
  std::vector<Tensor> values;  // held until every init is answered
  std::vector<Future<Status>> inits;
  for (int v = 0; v < dense; ++v) {
    values.push_back(initial(v));
    inits.push_back(client.Init(static_cast<uint32_t>(v), values.back()));
  }
  for (auto& f : inits) TOWERPS_RETURN_IF_ERROR(AwaitUnlessStopped(f, stop));
  return restored;
}

Status WriteReadyFile(const std::string& path) {
  std::ofstream ready(path, std::ios::trunc);
  if (!ready) return IoError("cannot write --ready-file " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

Status AwaitEveryWorker(ps::Client& client, const ps::JobConfig& job, std::chrono::seconds timeout,
                        const std::atomic<bool>* stop) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto report_at = start + std::chrono::seconds(2);
  for (;;) {
    auto asked = client.Stats(0);
    Result<ps::ServerStatsReport> stats = AwaitUnlessStopped(asked, stop);
    if (!stats.ok()) {
      if (stats.status().code() == StatusCode::kCancelled) return stats.status();
      TOWERPS_LOG(kWarning) << "not waiting for the other workers to join: server 0 cannot say "
                               "who has ("
                            << stats.status().message() << ")";
      return Status::Ok();
    }
    // Updates applied: the job began, so every worker joined once (a worker rejoining after a
    // failure, or a chief pulling the final values, does not wait for workers that are done).
    if (stats->max_version > 0) return Status::Ok();
    std::string missing;
    int count = 0;
    for (int w = 0; w < job.workers; ++w) {
      const auto& in = stats->registered_workers;
      if (std::find(in.begin(), in.end(), static_cast<uint32_t>(w)) != in.end()) continue;
      if (count++ < 8) missing += (missing.empty() ? "worker:" : ", worker:") + std::to_string(w);
    }
    if (count == 0) return Status::Ok();
    if (count > 8) missing += " and " + std::to_string(count - 8) + " more";
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    if (waited >= timeout) {
      return TimeoutError(missing + (count == 1 ? " has" : " have") +
                          " not joined the job within " + "--join-timeout-s " +
                          std::to_string(timeout.count()) +
                          ": a sync step needs every worker; is it running? (its log says why "
                          "not; raise --join-timeout-s for a slow start)");
    }
    if (Clock::now() >= report_at) {
      TOWERPS_LOG(kInfo) << "waiting for " << missing << " to join (" << waited.count()
                         << " s of --join-timeout-s " << timeout.count() << ")";
      report_at += std::chrono::seconds(10);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

Result<JoinPoint> JoinJob(ps::Client& client, const ps::JobConfig& job, int num_vars,
                          const std::vector<uint32_t>& tables, int64_t restored,
                          std::chrono::seconds join_timeout, const std::atomic<bool>* stop) {
  JoinPoint at;
  at.version = std::max<int64_t>(restored, 0);
  if (job.mode == ps::UpdateMode::kSync) {
    if (job.EffectiveReplicas() == job.workers) {
      TOWERPS_RETURN_IF_ERROR(AwaitEveryWorker(client, job, join_timeout, stop));
    }
    TOWERPS_ASSIGN_OR_RETURN(const SyncJoin join,
                             JoinSyncJob(client, num_vars, tables, at.version,
                                         job.EffectiveReplicas() == job.workers, stop));
    at.version = join.step;
    at.iter = join.step;
    at.exact = join.exact;
  } else {  // async, SSP and softsync versions count every worker's updates
    TOWERPS_ASSIGN_OR_RETURN(at.iter, JoinAsyncJob(client, num_vars, tables, at.version, stop));
  }
  return at;
}

}  // namespace towerps::worker
