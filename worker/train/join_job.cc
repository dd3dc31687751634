#include "worker/train/join_job.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/logging.h"

namespace towerps::worker {
namespace {

// One pull of every variable, at `version` (exactly, or at least).
std::vector<std::future<Result<ps::PulledVariable>>> PullAll(ps::Client& client, int num_vars,
                                                             int64_t version, bool exact) {
  std::vector<std::future<Result<ps::PulledVariable>>> pulls;
  for (int v = 0; v < num_vars; ++v)
    pulls.push_back(client.Pull({.variable_id = static_cast<uint32_t>(v),
                                 .min_version = version,
                                 .clock = 0,
                                 .exact = exact}));
  return pulls;
}

}  // namespace

Result<SyncJoin> JoinSyncJob(ps::Client& client, int num_vars, int64_t first, bool full_sync,
                             const std::atomic<bool>* stop) {
  auto pulls = PullAll(client, num_vars, first, /*exact=*/false);
  int64_t lowest = -1, highest = -1;
  for (int v = 0; v < num_vars; ++v) {
    TOWERPS_ASSIGN_OR_RETURN(ps::PulledVariable p, AwaitUnlessStopped(pulls[v], stop));
    lowest = v == 0 ? p.version : std::min(lowest, p.version);
    highest = std::max(highest, p.max_version);
  }
  SyncJoin join{lowest, full_sync};
  if (lowest > first) {
    TOWERPS_LOG(kInfo) << "joining a running job at step " << lowest
                       << (highest > lowest ? " (recomputing it: the chunks this worker's "
                                              "predecessor pushed to are at step " +
                                                  std::to_string(highest) + ")"
                                            : "");
  }
  if (!join.exact || highest == lowest) return join;
  pulls = PullAll(client, num_vars, lowest, /*exact=*/true);
  for (int v = 0; v < num_vars; ++v) {
    Result<ps::PulledVariable> p = AwaitUnlessStopped(pulls[v], stop);
    if (p.ok()) continue;
    if (p.status().code() != StatusCode::kFailedPrecondition) return p.status();
    if (join.exact) {
      TOWERPS_LOG(kWarning) << "step " << lowest << " cannot be recomputed bit for bit ("
                            << p.status().message() << "); going on from the latest values";
    }
    join.exact = false;
  }
  return join;
}

Result<int64_t> JoinAsyncJob(ps::Client& client, int num_vars, int64_t first,
                             const std::atomic<bool>* stop) {
  auto pulls = PullAll(client, num_vars, first, /*exact=*/false);
  int64_t iter = -1;
  for (int v = 0; v < num_vars; ++v) {
    TOWERPS_ASSIGN_OR_RETURN(ps::PulledVariable p, AwaitUnlessStopped(pulls[v], stop));
    iter = v == 0 ? p.min_clock : std::min(iter, p.min_clock);
  }
  iter = std::max<int64_t>(iter, 0);
  if (iter > 0) TOWERPS_LOG(kInfo) << "joining a running job at iteration " << iter;
  return iter;
}

Status WriteReadyFile(const std::string& path) {
  std::ofstream ready(path, std::ios::trunc);
  if (!ready) return IoError("cannot write --ready-file " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

Result<JoinPoint> JoinJob(ps::Client& client, const ps::JobConfig& job, int num_vars,
                          int64_t restored, const std::atomic<bool>* stop) {
  JoinPoint at;
  at.version = std::max<int64_t>(restored, 0);
  if (job.mode == ps::UpdateMode::kSync) {
    TOWERPS_ASSIGN_OR_RETURN(
        const SyncJoin join,
        JoinSyncJob(client, num_vars, at.version, job.EffectiveReplicas() == job.workers, stop));
    at.version = join.step;
    at.iter = join.step;
    at.exact = join.exact;
  } else {  // async, SSP and softsync versions count every worker's updates
    TOWERPS_ASSIGN_OR_RETURN(at.iter, JoinAsyncJob(client, num_vars, at.version, stop));
  }
  return at;
}

}  // namespace towerps::worker
