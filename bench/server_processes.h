// ServerProcesses: real towerps-server processes on loopback for a benchmark, with the job's
// flags, a job secret (or none), and their endpoints read from ready files.
//
// Contract: the processes are killed, and their directory removed, when the object goes. Start
// fails naming the server that did not come up, with its log.
#ifndef TOWERPS_BENCH_SERVER_PROCESSES_H_
#define TOWERPS_BENCH_SERVER_PROCESSES_H_

#include <filesystem>
#include <string>
#include <vector>

#include "common/subprocess.h"
#include "common/transport.h"
#include "job/job_config.h"
#include "towerps/status.h"

namespace towerps::bench {

struct ServerProcessOptions {
  int servers = 1;
  int threads = 1;     // each server's shards
  std::string binary;  // towerps-server; empty: next to this executable
  // How clients prove membership: "none" (--insecure), "auth" (a job secret) or "encrypt".
  std::string security = "auth";
  std::string transport = "tcp";  // the servers' --transport
  // Tables with storage=rocksdb: the servers' --table-dir; empty: tables/ in the servers'
  // directory (removed with it).
  std::string table_dir;
};

struct ServerProcesses {
  std::vector<Subprocess> processes;
  std::vector<std::string> endpoints;  // index = rank
  std::filesystem::path dir;
  TransportSecurity security;  // what clients need to connect
  ~ServerProcesses();
};

Status StartServerProcesses(const ServerProcessOptions& options, const ps::JobConfig& job,
                            ServerProcesses* servers);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_SERVER_PROCESSES_H_
