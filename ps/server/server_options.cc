#include "ps/server/server_options.h"

#include <unistd.h>

#include <filesystem>
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
  if (checkpoint_full_every < 1) {
    return InvalidArgumentError("--checkpoint-full-every=" + std::to_string(checkpoint_full_every) +
                                " must be >= 1 (1: every checkpoint is full)");
  }
  return ValidateTableDir();
}

Status ServerOptions::ValidateTableDir() const {
  const std::string user = job.table_policies.DiskUser();
  if (user.empty()) return Status::Ok();
  if (table_dir.empty()) {
    return InvalidArgumentError(user +
                                " keeps rows on disk: give the servers a --table-dir, a "
                                "writable directory on a local disk");
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(table_dir, ec)) {
    return InvalidArgumentError("--table-dir=" + table_dir + " (for " + user +
                                ") is not a directory; create it, or give another");
  }
  if (::access(table_dir.c_str(), W_OK) != 0) {
    return InvalidArgumentError("--table-dir=" + table_dir + " (for " + user +
                                ") is not writable; give a directory this server may write");
  }
  return Status::Ok();
}

}  // namespace towerps::ps
