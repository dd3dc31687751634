#include "launch/backends/hostfile_launcher.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/job_secret.h"
#include "common/sibling_executable.h"
#include "job/replica_placement.h"
#include "launch/command_lines.h"
#include "launch/gpus.h"
#include "launch/hostfile.h"
#include "launch/job_record.h"
#include "launch/job_supervisor.h"
#include "launch/launch_flags.h"
#include "launch/process_group.h"

namespace towerps::launch {
namespace {

namespace fs = std::filesystem;

// The watchdog command that runs `argv` on the remote host.
std::vector<std::string> UnderWatchdog(const LaunchOptions& o, const SshOptions& ssh, int gpu_rank,
                                       std::vector<std::string> argv) {
  std::error_code ec;
  std::vector<std::string> w = {
      SiblingExecutable("towerps-launch"), "--stdin-watchdog", "--grace-ms",
      std::to_string(o.grace.count()),     "--chdir",          fs::current_path(ec).string()};
  if (const int gpus = GpusNeeded(o.worker.towers); gpu_rank >= 0 && gpus > 0) {
    w.insert(w.end(), {"--gpu-rank", std::to_string(gpu_rank), "--gpus", std::to_string(gpus)});
  }
  for (const std::string& e : ssh.env) w.insert(w.end(), {"--env", e});
  if (!o.insecure) w.push_back("--secret-from-stdin");  // the secret follows on the session's stdin
  w.push_back("--");
  w.insert(w.end(), std::make_move_iterator(argv.begin()), std::make_move_iterator(argv.end()));
  return w;
}

// `name` itself when it holds a '/', else its first executable match on PATH.
Result<std::string> FindProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (access(name.c_str(), X_OK) == 0) return name;
    return NotFoundError("--ssh " + name + " is not an executable");
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return NotFoundError("--ssh " + name +
                       " is not on PATH; install openssh-client or give its "
                       "path with --ssh");
}

}  // namespace

std::string ShellQuote(const std::string& word) {
  const bool safe = !word.empty() && word.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_./:=,+-@%") == std::string::npos;
  if (safe) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> SshArgv(const SshOptions& ssh, const std::string& host,
                                 const std::vector<std::string>& remote_argv) {
  std::vector<std::string> argv = {ssh.ssh};
  argv.insert(argv.end(), ssh.ssh_opts.begin(), ssh.ssh_opts.end());
  // The user's -o settings come first, so they win; then ours.
  argv.insert(argv.end(), {"-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=20", "-o",
                           "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3", host});
  std::string command = "exec";
  for (const std::string& a : remote_argv) command += " " + ShellQuote(a);
  argv.push_back(command);
  return argv;
}

HostfileLauncher::HostfileLauncher(LaunchOptions options, SshOptions ssh)
    : options_(std::move(options)),
      ssh_(std::move(ssh)),
      run_dir_(options_.run_dir.empty() ? DefaultRunDir() : options_.run_dir) {}

// Where every process runs: the hosts of --hostfile or -H, servers first.
Result<std::vector<HostPlacement>> HostfileLauncher::Plan() const {
  std::vector<HostEntry> hosts;
  if (!ssh_.host_list.empty()) {
    TOWERPS_ASSIGN_OR_RETURN(hosts, ParseHostList(ssh_.host_list, "-H"));
  } else {
    std::ifstream in(ssh_.hostfile);
    if (!in) return NotFoundError("--hostfile " + ssh_.hostfile + ": cannot open the file");
    const std::string text(std::istreambuf_iterator<char>(in), {});
    TOWERPS_ASSIGN_OR_RETURN(hosts, ParseHostfile(text, ssh_.hostfile));
  }
  if (options_.base_port == 0) {
    return InvalidArgumentError(
        "--hostfile needs a fixed --base-port (the entry point's default "
        "is 7700): workers on other hosts must know the servers' ports");
  }
  return PlaceOnHosts(hosts, options_.job.ServerProcesses(), options_.job.workers);
}

// The secret crosses to each host inside its ssh session: the first line the remote watchdog
// reads (launch/stdin_watchdog.h). Empty with --insecure.
Result<std::string> HostfileLauncher::SecretLine() const {
  TOWERPS_ASSIGN_OR_RETURN(const std::string file, PrepareJobSecret(options_, run_dir_));
  if (file.empty()) return std::string();
  TOWERPS_ASSIGN_OR_RETURN(JobSecret secret, JobSecret::Load(file));
  return secret.ToText();
}

// --ps-replicas 2: every server's endpoint. Servers go round-robin over the hosts, so that a
// chunk's backup (on the next server) is on another host than its primary, unless there are
// fewer hosts than needed (warned here).
std::vector<std::string> HostfileLauncher::ReplicaPeers(
    const std::vector<HostPlacement>& plan) const {
  const LaunchOptions& o = options_;
  std::vector<std::string> peers, server_hosts;
  if (o.job.ps_replicas < 2) return peers;
  for (const HostPlacement& p : plan) {
    if (!p.server) continue;
    peers.push_back("tcp://" + p.host + ":" + std::to_string(o.base_port + p.rank));
    server_hosts.push_back(p.host);
  }
  for (int g = 0; g < o.job.servers; ++g) {
    const std::vector<int> copies = ps::ReplicasOf(o.job, g);
    if (server_hosts[copies[0]] == server_hosts[copies[1]]) {
      std::printf(
          "[launch] warning: both copies of ps:%d's chunks (ps:%d and ps:%d) are on %s: "
          "that host's loss would lose them; give the hostfile more server hosts\n",
          g, copies[0], copies[1], server_hosts[copies[0]].c_str());
    }
  }
  return peers;
}

Status HostfileLauncher::Check() {
  TOWERPS_RETURN_IF_ERROR(ValidateLaunchOptions(options_));
  if (options_.bind_cores) {
    return InvalidArgumentError(
        "--bind-cores binds the processes of a job on this machine; with --hostfile or -H each "
        "host starts its own: leave it out (or bind them with the hosts' cpusets)");
  }
  TOWERPS_RETURN_IF_ERROR(CheckRunDir(run_dir_));
  TOWERPS_ASSIGN_OR_RETURN(ssh_.ssh, FindProgram(ssh_.ssh));
  return Plan().status();
}

Status HostfileLauncher::Run() {
  TOWERPS_RETURN_IF_ERROR(Check());
  const LaunchOptions& o = options_;
  TOWERPS_ASSIGN_OR_RETURN(const std::vector<HostPlacement> plan, Plan());
  TOWERPS_RETURN_IF_ERROR(CreateRunDir(run_dir_));
  TOWERPS_RETURN_IF_ERROR(WriteJobRecord(options_, run_dir_));
  TOWERPS_ASSIGN_OR_RETURN(const std::string secret_line, SecretLine());
  ProcessGroup group(run_dir_);
  if (o.job_progress_bar) group.EnableProgress("worker:0", ExamplesPerChiefStep(o.job));
  JobSupervisor supervisor(&group, o.grace, o.interrupt);
  std::ofstream table((fs::path(run_dir_) / "processes.txt").string());
  const std::vector<std::string> peers = ReplicaPeers(plan);
  for (const HostPlacement& p : plan) {
    if (!p.server && p.rank == 0) {
      options_.worker.dist_endpoint =
          DistEndpoint(o, p.host, o.base_port + o.job.ServerProcesses());
    }
  }
  std::vector<std::string> endpoints;
  for (const HostPlacement& p : plan) {
    std::vector<std::string> argv;
    std::string tag;
    if (p.server) {
      const int port = o.base_port + p.rank;
      argv = UnderWatchdog(o, ssh_, -1, ServerArgv(o, p.rank, port, peers));
      tag = "ps:" + std::to_string(p.rank);
      endpoints.push_back("tcp://" + p.host + ":" + std::to_string(port));
      std::printf("[launch] %s on %s, port %d\n", tag.c_str(), p.host.c_str(), port);
    } else {
      argv = UnderWatchdog(o, ssh_, p.local_rank, WorkerArgv(o, p.rank, endpoints));
      tag = "worker:" + std::to_string(p.rank);
      std::printf("[launch] %s on %s, local rank %d\n", tag.c_str(), p.host.c_str(), p.local_rank);
    }
    std::fflush(stdout);
    if (supervisor.interrupted()) return supervisor.Cancel();
    TOWERPS_ASSIGN_OR_RETURN(size_t i, group.Start({.tag = tag,
                                                    .argv = SshArgv(ssh_, p.host, argv),
                                                    .stop_by = StopBy::kClosingStdin,
                                                    .stdin_line = secret_line}));
    supervisor.SetHost(i, p.host);
    table << (p.server ? "ps " : "worker ") << p.rank << " host " << p.host << " pid "
          << group.pid(i) << " log " << group.LogPath(i) << "\n";
  }
  table.flush();
  // A remote worker's ready file would be on its own host: its rejoin is bounded by the other
  // workers' RPC deadlines instead.
  supervisor.SetRestartPolicy(MakeRestartPolicy(o, run_dir_, /*workers_local=*/false));
  // The plan lists the servers first, so they are the group's first children.
  TOWERPS_RETURN_IF_ERROR(supervisor.RunToCompletion(static_cast<size_t>(o.job.ServerProcesses())));
  std::map<std::string, int> restarts;
  for (const auto& [i, n] : supervisor.restarts()) restarts[group.tag(i)] = n;
  return RecordRestartsInSummary(o, restarts);
}

LauncherBackend HostfileBackend() {
  return {.name = "hostfile",
          .applies = [](const LaunchFlags& flags, const Environment&) { return flags.ssh.given(); },
          .make = [](const LaunchFlags& flags, const Environment& env,
                     LaunchOptions options) -> Result<std::unique_ptr<Launcher>> {
            TOWERPS_ASSIGN_OR_RETURN(SshOptions ssh, SshOptionsFromFlags(flags.ssh, env));
            if (!flags.bind_given) options.bind = "0.0.0.0";  // the hosts must reach the servers
            if (options.base_port == 0) options.base_port = 7700;
            options.all_local = false;
            options.job_progress_bar = isatty(STDOUT_FILENO) != 0;
            return std::unique_ptr<Launcher>(
                std::make_unique<HostfileLauncher>(std::move(options), std::move(ssh)));
          }};
}

}  // namespace towerps::launch
