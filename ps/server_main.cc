// towerps-server: one parameter-server shard process. See ps/server.h.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "common/logging.h"
#include "common/process_setup.h"
#include "ps/job_flags.h"
#include "ps/security_flags.h"
#include "ps/server.h"

namespace po = boost::program_options;

namespace {

std::atomic<bool> g_stop{false};  // entry-point state: set by SIGINT/SIGTERM only

void OnSignal(int) { g_stop.store(true); }

}  // namespace

int main(int argc, char** argv) {
  using namespace towerps;
  ConfigureAllocatorForLargeMessages();
  ps::ServerOptions options;
  ps::JobFlags job_flags;
  ps::SecurityFlags security_flags;
  std::string log_level = "info";
  std::string ready_file;
  std::string peers;
  int64_t stats_ms = options.stats_log_interval.count();
  po::options_description process("Server options");
  process.add_options()("help,h", "show this help")("version",
                                                    "print the version and git revision")(
      "config", po::value<std::string>(), "INI file with job options (command line wins)")(
      "rank", po::value(&options.rank)->default_value(0), "this server's rank, 0..servers-1")(
      "bind", po::value(&options.bind)->default_value(options.bind),
      "address of the interface to listen on (0.0.0.0 for all)")(
      "port", po::value(&options.port)->default_value(0), "TCP port; 0 picks a free one")(
      "threads", po::value(&options.threads)->default_value(options.threads),
      "threads owning chunks (each chunk has one owner)")(
      "logdir", po::value(&options.logdir),
      "TensorBoard event files in DIR/ps-<rank>: updates, drops, bytes and staleness")(
      "checkpoint-dir", po::value(&options.checkpoint_dir),
      "directory for ps-<rank>.ckpt; "
      "a checkpoint found there is restored at start")(
      "checkpoint-every", po::value(&options.checkpoint_every)->default_value(0),
      "save at least every N versions (0: only at shutdown)")(
      "log-device-placement", po::bool_switch(&options.log_device_placement),
      "print which server holds each chunk")("stats-interval-ms",
                                             po::value(&stats_ms)->default_value(stats_ms),
                                             "how often to log statistics")(
      "peers", po::value(&peers),
      "--ps-replicas 2: every server's endpoint, comma-separated, in rank order")(
      "rejoin", po::bool_switch(&options.rejoin),
      "--ps-replicas 2: this server restarted; take its chunks' state from its peers")(
      "ready-file", po::value(&ready_file),
      "write the listening endpoint to this file once serving (for launchers)")(
      "log-level", po::value(&log_level)->default_value(log_level), "debug, info, warning, error");
  po::options_description all("Usage: towerps-server [options]\n\nRuns one parameter-server shard");
  all.add(process).add(security_flags.options()).add(job_flags.options());

  po::variables_map vm;
  if (auto exit_code = ps::ParseCommandLine("towerps-server", argc, argv, all, &vm)) {
    return *exit_code;
  }
  Result<LogLevel> level = ParseLogLevel(log_level);
  Result<ps::JobConfig> job = job_flags.ToConfig();
  Result<TransportSecurity> security =
      security_flags.ToSecurity(std::getenv("TOWERPS_SECRET_FILE"));
  Status bad = !level.ok() ? level.status() : !job.ok() ? job.status() : security.status();
  if (!bad.ok()) {
    std::cerr << "towerps-server: " << bad.message() << "\n";
    return 2;
  }
  InitLogging({.role = "ps", .rank = options.rank, .min_level = *level});
  options.job = *job;
  for (size_t start = 0; !peers.empty() && start <= peers.size();) {
    const size_t comma = std::min(peers.find(',', start), peers.size());
    options.peers.push_back(peers.substr(start, comma - start));
    start = comma + 1;
  }
  options.transport.security = *security;
  options.transport.path = *security_flags.path();  // checked by ToSecurity
  options.stats_log_interval = std::chrono::milliseconds(stats_ms);
  options.stop = &g_stop;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  auto server = ps::Server::Create(std::move(options));
  if (!server.ok()) {
    TOWERPS_LOG(kError) << server.status().ToString();
    return 1;
  }
  if (!ready_file.empty()) {
    std::ofstream(ready_file + ".tmp") << (*server)->endpoint() << "\n";
    std::rename((ready_file + ".tmp").c_str(), ready_file.c_str());
  }
  Status s = (*server)->Run();
  if (!s.ok()) {
    TOWERPS_LOG(kError) << s.ToString();
    // EX_TEMPFAIL: the launcher restarts a server that was replaced by its backup.
    return (*server)->deposed() ? ps::kExitReplaced : 1;
  }
  return 0;
}
