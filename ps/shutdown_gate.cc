#include "ps/shutdown_gate.h"

#include <string>

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
