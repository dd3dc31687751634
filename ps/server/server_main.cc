// towerps-server: one parameter-server shard process. See ps/server/server.h.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "common/command_line.h"
#include "common/logging.h"
#include "common/process_setup.h"
#include "job/job_flags.h"
#include "job/security_flags.h"
#include "ps/server/server.h"
#include "ps/server/server_threads.h"
#include "ps/server/shutdown_gate.h"

namespace po = boost::program_options;

namespace towerps {
namespace {

std::atomic<bool> g_stop{false};  // entry-point state: set by SIGINT/SIGTERM only

void OnSignal(int) { g_stop.store(true); }

// The server's own flags, bound to `f`.
struct ServerFlags {
  ps::ServerOptions options;
  std::string log_level = "info", ready_file, peers;
  int64_t stats_ms = options.stats_log_interval.count();
  int64_t shutdown_grace_ms = options.shutdown_grace.count();
  int64_t orphan_timeout_ms = options.orphan_timeout.count();
  std::string threads = "auto";
};

void AddServerOptions(ServerFlags& f, po::options_description& desc) {
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "config", po::value<std::string>(), "INI file with job options (command line wins)")(
      "rank", po::value(&f.options.rank)->default_value(0), "this server's rank, 0..servers-1")(
      "bind", po::value(&f.options.bind)->default_value(f.options.bind),
      "address of the interface to listen on (0.0.0.0 for all)")(
      "port", po::value(&f.options.port)->default_value(0), "TCP port; 0 picks a free one")(
      "threads", po::value(&f.threads)->default_value(f.threads),
      "threads owning chunks (each chunk has one owner): a number, or auto for half this "
      "host's cores, 1 to 8; with 1 and no replicas, the thread that receives the requests owns "
      "the chunks")(
      "logdir", po::value(&f.options.logdir),
      "TensorBoard event files in DIR/ps-<rank>: updates, drops, bytes and staleness")(
      "checkpoint-dir", po::value(&f.options.checkpoint_dir),
      "directory for ps-<rank>.ckpt; "
      "a checkpoint found there is restored at start")(
      "checkpoint-every", po::value(&f.options.checkpoint_every)->default_value(0),
      "save at least every N versions (0: only at shutdown)")(
      "checkpoint-full-every", po::value(&f.options.checkpoint_full_every)->default_value(1),
      "every K-th checkpoint is full; the ones between are deltas, ps-<rank>.ckpt.delta-<k>, "
      "holding only the table rows changed since the one before (1: all full)")(
      "table-dir", po::value(&f.options.table_dir),
      "tables with --table-storage rocksdb: an existing, writable directory for this server's "
      "disk tier, DIR/ps-<rank> (cleared at start: the tier is rebuilt from a checkpoint or "
      "replica)")("log-device-placement", po::bool_switch(&f.options.log_device_placement),
                  "print which server holds each chunk")(
      "stats-interval-ms", po::value(&f.stats_ms)->default_value(f.stats_ms),
      "how often to log statistics")(
      "peers", po::value(&f.peers),
      "--ps-replicas 2: every server's endpoint, comma-separated, in rank order")(
      "rejoin", po::bool_switch(&f.options.rejoin),
      "--ps-replicas 2: this server restarted; take its chunks' state from its peers")(
      "shutdown-grace-ms", po::value(&f.shutdown_grace_ms)->default_value(f.shutdown_grace_ms),
      "after the chief asks the server to stop (--mpi, --slurm, --cluster), wait at most this "
      "long for the other workers to leave")(
      "orphan-timeout-ms", po::value(&f.orphan_timeout_ms)->default_value(f.orphan_timeout_ms),
      "stop, failing and naming the silent workers, after hearing from no worker and no "
      "launcher for this long, from the start or since the last message: a job whose workers "
      "all died leaves no server behind (0: wait for ever)")(
      "ready-file", po::value(&f.ready_file),
      "write the listening endpoint to this file once serving (for launchers)")(
      "log-level", po::value(&f.log_level)->default_value(f.log_level),
      "debug, info, warning, error");
}

// Writes the listening endpoint to `path` atomically (launchers poll for it).
void WriteReadyFile(const std::string& path, const std::string& endpoint) {
  if (path.empty()) return;
  std::ofstream(path + ".tmp") << endpoint << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
}

// The parsed flags as the server's typed options; kInvalidArgument naming the bad flag.
Result<ps::ServerOptions> ToOptions(const ServerFlags& f, const ps::JobFlags& job_flags,
                                    const ps::SecurityFlags& security_flags,
                                    const po::variables_map& vm, LogLevel* level) {
  TOWERPS_ASSIGN_OR_RETURN(*level, ParseLogLevel(f.log_level));
  ps::ServerOptions options = f.options;
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgumentError("--port=" + std::to_string(options.port) +
                                " is not a TCP port: give 1 to 65535, or 0 for a free one");
  }
  TOWERPS_ASSIGN_OR_RETURN(options.job, job_flags.ToConfig(vm));
  TOWERPS_ASSIGN_OR_RETURN(options.transport.security,
                           security_flags.ToSecurity(std::getenv("TOWERPS_SECRET_FILE")));
  options.transport.path = *security_flags.path();  // checked by ToSecurity
  for (size_t start = 0; !f.peers.empty() && start <= f.peers.size();) {
    const size_t comma = std::min(f.peers.find(',', start), f.peers.size());
    options.peers.push_back(f.peers.substr(start, comma - start));
    start = comma + 1;
  }
  options.stats_log_interval = std::chrono::milliseconds(f.stats_ms);
  TOWERPS_ASSIGN_OR_RETURN(options.threads, ps::ParseServerThreads(f.threads, "--threads"));
  TOWERPS_RETURN_IF_ERROR(ps::CheckShutdownGrace(f.shutdown_grace_ms));
  options.shutdown_grace = std::chrono::milliseconds(f.shutdown_grace_ms);
  TOWERPS_RETURN_IF_ERROR(ps::CheckOrphanTimeout(f.orphan_timeout_ms));
  options.orphan_timeout = std::chrono::milliseconds(f.orphan_timeout_ms);
  options.stop = &g_stop;
  return options;
}

int Main(int argc, char** argv) {
  ConfigureAllocatorForLargeMessages();
  ServerFlags flags;
  ps::JobFlags job_flags;
  ps::SecurityFlags security_flags;
  po::options_description process("Server options");
  AddServerOptions(flags, process);
  po::options_description all("Usage: towerps-server [options]\n\nRuns one parameter-server shard");
  all.add(process).add(security_flags.options()).add(job_flags.options());
  po::variables_map vm;
  if (auto exit_code = ParseCommandLine("towerps-server", argc, argv, all, &vm)) {
    return *exit_code;
  }
  LogLevel level = LogLevel::kInfo;
  Result<ps::ServerOptions> options = ToOptions(flags, job_flags, security_flags, vm, &level);
  if (!options.ok()) {
    std::cerr << "towerps-server: " << options.status().message() << "\n";
    return 2;
  }
  InitLogging({.role = "ps", .rank = options->rank, .min_level = level});
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto server = ps::Server::Create(*std::move(options));
  if (!server.ok()) {
    TOWERPS_LOG(kError) << server.status().ToString();
    return 1;
  }
  WriteReadyFile(flags.ready_file, (*server)->endpoint());
  Status s = (*server)->Run();
  if (!s.ok()) {
    TOWERPS_LOG(kError) << s.ToString();
    // EX_TEMPFAIL: the launcher restarts a server that was replaced by its backup.
    return (*server)->deposed() ? ps::kExitReplaced : 1;
  }
  return 0;
}

}  // namespace
}  // namespace towerps

int main(int argc, char** argv) { return towerps::Main(argc, argv); }
