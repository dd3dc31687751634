#include "ps/server/server_options.h"

#include <string>

namespace towerps::ps {

Status ServerOptions::Validate() const {
  TOWERPS_RETURN_IF_ERROR(job.Validate());
  const int processes = job.ServerProcesses();
  if (rank < 0 || rank >= processes) {
    return InvalidArgumentError("--rank=" + std::to_string(rank) + " is outside 0.." +
                                std::to_string(processes - 1) +
                                " (--servers=" + std::to_string(job.servers) +
                                ", --ps-replicas=" + std::to_string(job.ps_replicas) + ")");
  }
  if (job.ps_replicas > 1 && static_cast<int>(peers.size()) != processes) {
    return InvalidArgumentError("--ps-replicas=2 needs --peers with the endpoints of all " +
                                std::to_string(processes) + " servers; got " +
                                std::to_string(peers.size()));
  }
  if (threads < 1 || threads > 256) {
    return InvalidArgumentError("--threads=" + std::to_string(threads) +
                                " must be between 1 and 256");
  }
  if (checkpoint_every < 0) {
    return InvalidArgumentError("--checkpoint-every must be >= 0");
  }
  return Status::Ok();
}

}  // namespace towerps::ps
