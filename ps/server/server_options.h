// ServerOptions: one parameter-server process's options - its rank, address, threads,
// checkpoints, replica peers, logging - beside the job's configuration every process shares
// (job/job_config.h). Filled by towerps-server's flags (ps/server/server_main.cc) or by a test.
//
// Contract: a plain value; Validate() before a Server is created from it.
#ifndef TOWERPS_PS_SERVER_SERVER_OPTIONS_H_
#define TOWERPS_PS_SERVER_SERVER_OPTIONS_H_

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "common/transport.h"
#include "job/job_config.h"
#include "towerps/status.h"

namespace towerps::ps {

struct ServerOptions {
  int rank = 0;
  std::string bind = "127.0.0.1";  // interface address to listen on
  int port = 0;                    // 0: any free port (see Server::endpoint)
  int threads = 1;                 // shards (ps/server/server_threads.h: --threads auto)
  std::string checkpoint_dir;      // empty: no checkpoints
  int64_t checkpoint_every = 0;    // versions between checkpoints; 0: only at shutdown
  // Every K-th checkpoint is full, the others deltas (ps/server/checkpoint_chain.h); 1: all full.
  int64_t checkpoint_full_every = 1;
  // Tables with storage=rocksdb: an existing, writable directory; the server's disk tier is
  // TierDir() inside it (ps/server/row_disk.h).
  std::string table_dir;
  bool log_device_placement = false;
  std::chrono::milliseconds stats_log_interval{10000};
  // TensorBoard event files in <logdir>/ps-<rank>, written every event_interval
  // (ps/server/server_events.h).
  std::string logdir;
  std::chrono::milliseconds event_interval{1000};
  const std::atomic<bool>* stop = nullptr;  // borrowed; set by a signal handler, may be null
  // Replication: every server's endpoint (index = rank), and whether this server restarted and
  // must take its chunks' state from its peers.
  std::vector<std::string> peers;
  bool rejoin = false;
  std::chrono::milliseconds join_timeout{30000};
  // How long a chief's shutdown waits for the other workers to leave (ps/server/shutdown_gate.h).
  std::chrono::milliseconds shutdown_grace{60000};
  // How long a server waits to hear from any worker or launcher before it stops, failing
  // (ps/server/shutdown_gate.h); 0: for ever.
  std::chrono::milliseconds orphan_timeout{600000};
  TransportOptions transport;
  JobConfig job;

  // Checks the options a server cannot run with (the job's, then the process's own):
  // kInvalidArgument naming the flag and its value.
  Status Validate() const;
  // <table_dir>/ps-<rank>: this server's own disk tier (servers may share a table_dir).
  Status ValidateTableDir() const;
  std::string TierDir() const { return table_dir + "/ps-" + std::to_string(rank); }
};

}  // namespace towerps::ps

#endif  // TOWERPS_PS_SERVER_SERVER_OPTIONS_H_
