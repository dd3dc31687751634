#include "ps/server/shutdown_gate.h"

#include <string>
#include <string_view>

#include "common/logging.h"
#include "common/parse.h"

namespace towerps::ps {

Status CheckShutdownGrace(int64_t ms) {
  if (ms >= 0) return Status::Ok();
  return InvalidArgumentError("--shutdown-grace-ms " + std::to_string(ms) +
                              " is negative: give the milliseconds to wait (0: stop at once)");
}

void ShutdownGate::ChiefAsked() {
  if (!chief_asked_) chief_deadline_ = Deadline::After(grace_);
  chief_asked_ = true;
  WorkerLeft(0);
}

void ShutdownGate::WorkerLeft(int rank) {
  if (rank >= 0 && rank < workers_) left_.insert(rank);
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
  constexpr std::string_view kPrefix = "worker:";
  Result<int> rank = InvalidArgumentError("not a worker");
  if (peer.starts_with(kPrefix)) {
    rank = ParseInt<int>(std::string_view(peer).substr(kPrefix.size()), "worker rank", 0,
                         workers_ - 1);
  }
  if (!rank.ok()) {
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
                                      : "stop signal received")
                     << "; stopping";
}

std::string ShutdownGate::Missing() const {
  std::string out;
  for (int r = 0; r < workers_; ++r) {
    if (left_.count(r) != 0) continue;
    if (!out.empty()) out += ", ";
    out += "worker:" + std::to_string(r);
  }
  return out;
}

}  // namespace towerps::ps
