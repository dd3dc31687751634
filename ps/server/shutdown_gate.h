// ShutdownGate: when a server may stop after it was asked to.
//
// A launcher asks only once every worker has exited, so the server stops at once. The chief
// asks itself where no launcher stays behind (--mpi, --slurm, --cluster: --shutdown-servers),
// and the other workers may still need the servers then: a PyTorch worker in a stale mode pulls
// its final values after its last step, possibly after the chief is done. So every worker
// started with --shutdown-servers says when it is done (a `leave` message), and a chief's
// request stops the server once every worker has left, or once `grace` has passed since the
// chief asked (a worker that died or never calls finish() cannot keep the servers alive).
//
// Nor can a job that is gone: where no launcher stays behind, workers that all died before
// registering, or a chief that died before asking, would leave the servers waiting for ever.
// So a server that hears from no worker and no launcher for `orphan_timeout` (counted from
// the first CheckNotOrphaned, Run's start, until the first message) is orphaned: Run() stops
// it, saving a final checkpoint as ever, and fails naming the workers it never heard from and
// those that had not left.
//
// Who may ask: the chief (worker 0, routing id "worker:0") or a launcher or admin tool (an id
// starting "launcher"). With a job secret only the job's processes can connect at all; this
// keeps its workers from stopping servers by mistake, and, --insecure, strangers who do not
// know these names. Refusals are counted, and logged once.
//
// Contract: owned by the server's I/O thread; not thread-safe. Ranks are worker ranks,
// 0..workers-1; others are ignored (Left refuses them).
#ifndef TOWERPS_PS_SERVER_SHUTDOWN_GATE_H_
#define TOWERPS_PS_SERVER_SHUTDOWN_GATE_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "towerps/result.h"

namespace towerps::ps {

// A --shutdown-grace-ms value (the server's and towerps-launch's): kInvalidArgument when negative.
Status CheckShutdownGrace(int64_t ms);
// A --orphan-timeout-ms value (the server's and towerps-launch's): kInvalidArgument when negative.
Status CheckOrphanTimeout(int64_t ms);

class ShutdownGate {
 public:
  // `orphan_timeout` 0: never orphaned (a launcher that stops its servers itself, or a test).
  ShutdownGate(int workers, std::chrono::milliseconds grace,
               std::chrono::milliseconds orphan_timeout = std::chrono::milliseconds(0));

  // A shutdown request from the peer of routing id `peer` (`name`: how logs name it):
  // kFailedPrecondition, counted, for one that may not ask; else the chief's or a launcher's.
  Status Asked(const std::string& peer, const std::string& name);
  // A `leave` from `peer`: its worker rank, or kInvalidArgument when it is not one of the job's
  // workers.
  Result<int> Left(const std::string& peer, const std::string& name);
  // Run()'s end: why the server stops (`deposed`: a backup took its place), and who had not
  // left when the chief's grace ran out.
  void LogWhyItStops(bool deposed) const;
  uint64_t refused() const { return refused_; }

  void LauncherAsked() { launcher_asked_ = true; }
  // The chief asked: it has left too, and the grace period starts (once).
  void ChiefAsked();
  void WorkerLeft(int rank);
  // Any message from the peer of routing id `peer`: a worker's ("worker:<rank>") or a
  // launcher's keeps the server from being orphaned. Cheap: called for every message.
  void Heard(const std::string& peer);
  // Called once a poll: kTimeout naming the silent workers once no worker or launcher has been
  // heard from for the orphan timeout (then orphaned() stays true); else OK.
  Status CheckNotOrphaned();
  bool orphaned() const { return orphaned_; }

  // Whether the server should stop now: a launcher asked, or the chief did and every worker
  // has left or the grace period is over.
  bool ShouldStop() const;
  bool chief_asked() const { return chief_asked_; }
  // The server stops on the chief's request with workers missing: the grace ran out first.
  bool GraceRanOut() const;
  // The workers that have not left ("worker:1, worker:3"), for the logs.
  std::string Missing() const;
  std::chrono::milliseconds grace() const { return grace_; }

 private:
  // The job's worker rank in routing id `peer` ("worker:<rank>"), if it names one.
  std::optional<int> WorkerRank(const std::string& peer) const;
  // "worker:1, worker:3": the workers for which `pick(rank)` holds.
  template <typename Pick>
  std::string Workers(Pick pick) const;

  int workers_;
  std::chrono::milliseconds grace_;
  bool launcher_asked_ = false, chief_asked_ = false;
  Deadline chief_deadline_ = Deadline::After(std::chrono::hours(24));
  std::set<int> left_;
  std::chrono::milliseconds orphan_timeout_;
  Deadline orphan_deadline_;
  // True at first, so that the wait counts from the first check (Run's start, after a restore).
  bool heard_since_check_ = true, orphaned_ = false;
  std::vector<bool> heard_;  // by worker rank: ever heard from
  uint64_t refused_ = 0;     // requests from neither the chief nor a launcher
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SHUTDOWN_GATE_H_
