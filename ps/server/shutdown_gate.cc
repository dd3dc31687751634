#include "ps/server/shutdown_gate.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>

#include "common/logging.h"
#include "common/parse.h"

namespace towerps::ps {

Status CheckOrphanTimeout(int64_t ms) {
  if (ms >= 0) return Status::Ok();
  return InvalidArgumentError("--orphan-timeout-ms " + std::to_string(ms) +
                              " is negative: give the milliseconds a server waits to hear from "
                              "any worker before it stops (0: for ever)");
}

Status CheckShutdownGrace(int64_t ms) {
  if (ms >= 0) return Status::Ok();
  return InvalidArgumentError("--shutdown-grace-ms " + std::to_string(ms) +
                              " is negative: give the milliseconds to wait (0: stop at once)");
}

ShutdownGate::ShutdownGate(int workers, std::chrono::milliseconds grace,
                           std::chrono::milliseconds orphan_timeout)
    : workers_(workers),
      grace_(grace),
      orphan_timeout_(orphan_timeout),
      orphan_deadline_(Deadline::After(orphan_timeout)),  // reset by the first check
      heard_(static_cast<size_t>(std::max(workers, 0)), false) {}

void ShutdownGate::ChiefAsked() {
  if (!chief_asked_) chief_deadline_ = Deadline::After(grace_);
  chief_asked_ = true;
  WorkerLeft(0);
}

void ShutdownGate::WorkerLeft(int rank) {
  if (rank >= 0 && rank < workers_) left_.insert(rank);
}

std::optional<int> ShutdownGate::WorkerRank(const std::string& peer) const {
  constexpr std::string_view kPrefix = "worker:";
  if (!peer.starts_with(kPrefix)) return std::nullopt;
  const Result<int> rank =
      ParseInt<int>(std::string_view(peer).substr(kPrefix.size()), "worker rank", 0, workers_ - 1);
  if (!rank.ok()) return std::nullopt;
  return *rank;
}

void ShutdownGate::Heard(const std::string& peer) {
  if (const std::optional<int> rank = WorkerRank(peer)) {
    heard_[static_cast<size_t>(*rank)] = true;
  } else if (!peer.starts_with("launcher")) {
    return;
  }
  heard_since_check_ = true;
}

Status ShutdownGate::CheckNotOrphaned() {
  if (orphan_timeout_.count() <= 0 || orphaned_) return Status::Ok();
  if (heard_since_check_) {
    heard_since_check_ = false;
    orphan_deadline_ = Deadline::After(orphan_timeout_);
    return Status::Ok();
  }
  if (!orphan_deadline_.expired()) return Status::Ok();
  orphaned_ = true;
  const std::string never = Workers([&](int r) { return !heard_[static_cast<size_t>(r)]; });
  const std::string stayed =
      Workers([&](int r) { return heard_[static_cast<size_t>(r)] && left_.count(r) == 0; });
  std::string who;
  if (!never.empty()) who += never + " never contacted it";
  if (!stayed.empty()) who += (who.empty() ? "" : "; ") + stayed + " went silent without leaving";
  if (who.empty()) who = "every worker had left, and the chief did not ask it to stop";
  return TimeoutError("no worker or launcher has contacted this server for " +
                      std::to_string(orphan_timeout_.count() / 1000) + " s (" + who +
                      "): the job is gone, so the server stops rather than outlive it; see the "
                      "workers' logs for why (--orphan-timeout-ms sets the wait, 0 for ever)");
}

bool ShutdownGate::ShouldStop() const {
  if (launcher_asked_) return true;
  if (!chief_asked_) return false;
  return static_cast<int>(left_.size()) >= workers_ || chief_deadline_.expired();
}

bool ShutdownGate::GraceRanOut() const {
  return chief_asked_ && !launcher_asked_ && static_cast<int>(left_.size()) < workers_ &&
         chief_deadline_.expired();
}

Status ShutdownGate::Asked(const std::string& peer, const std::string& name) {
  if (peer == "worker:0") {
    ChiefAsked();
    if (!ShouldStop()) {
      TOWERPS_LOG(kInfo) << "the chief asked to stop: waiting up to " << grace_.count()
                         << " ms for " << Missing() << " to leave";
    }
    return Status::Ok();
  }
  if (peer.starts_with("launcher")) {
    LauncherAsked();
    return Status::Ok();
  }
  if (refused_++ == 0) {
    TOWERPS_LOG(kWarning) << "refused shutdown from " << name
                          << ": only the chief (worker:0) or the launcher may stop a server"
                          << " (further refusals are counted in the stats)";
  }
  return FailedPreconditionError("only the chief (worker:0) or the launcher may stop a server; " +
                                 name + " may not");
}

Result<int> ShutdownGate::Left(const std::string& peer, const std::string& name) {
  const std::optional<int> rank = WorkerRank(peer);
  if (!rank) {
    return InvalidArgumentError("leave from " + name + ", which is not one of the job's " +
                                std::to_string(workers_) + " workers");
  }
  WorkerLeft(*rank);
  return *rank;
}

void ShutdownGate::LogWhyItStops(bool deposed) const {
  if (GraceRanOut()) {
    TOWERPS_LOG(kWarning) << "stopping as the chief asked " << grace_.count() << " ms ago, without "
                          << Missing()
                          << " having left (a worker that died, or a script that never called "
                             "finish())";
  }
  TOWERPS_LOG(kInfo) << (ShouldStop() ? "shutdown requested"
                         : deposed    ? "replaced by a peer"
                         : orphaned_  ? "orphaned"
                                      : "stop signal received")
                     << "; stopping";
}

template <typename Pick>
std::string ShutdownGate::Workers(Pick pick) const {
  std::string out;
  for (int r = 0; r < workers_; ++r) {
    if (!pick(r)) continue;
    if (!out.empty()) out += ", ";
    out += "worker:" + std::to_string(r);
  }
  return out;
}

std::string ShutdownGate::Missing() const {
  return Workers([&](int r) { return left_.count(r) == 0; });
}

}  // namespace towerps::ps
