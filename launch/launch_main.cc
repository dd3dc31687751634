// towerps-launch: starts a TowerPS job. Local mode (this file's only mode so far): M servers and
// N workers on this machine. See launch/local_launcher.h.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "launch/local_launcher.h"
#include "launch/rank_exec.h"
#include "launch/role.h"
#include "ps/job_flags.h"

namespace po = boost::program_options;

extern char** environ;

namespace {

std::atomic<int> g_signal{0};  // entry-point state: written by the signal handler only

void OnSignal(int sig) { g_signal.store(sig); }

}  // namespace

int main(int argc, char** argv) {
  using namespace towerps;
  launch::LaunchOptions options;
  ps::JobFlags job_flags;
  worker::WorkerFlags worker_flags;
  long grace_ms = options.grace.count();
  po::options_description launch("Launcher options");
  launch.add_options()("help,h", "show this help")(
      "config", po::value<std::string>(),
      "INI file with job and worker options (command line wins)")(
      "run-dir", po::value(&options.run_dir),
      "directory for logs (default runs/<date>-<time>-<pid>)")(
      "bind", po::value(&options.bind)->default_value(options.bind), "address servers listen on")(
      "base-port", po::value(&options.base_port)->default_value(0),
      "server r listens on base-port + r; 0 picks free ports")(
      "server-threads", po::value(&options.server_threads)->default_value(1),
      "--threads per server")("checkpoint-dir", po::value(&options.checkpoint_dir),
                              "servers checkpoint here and resume from it")(
      "checkpoint-every", po::value(&options.checkpoint_every)->default_value(0),
      "versions between checkpoints (0: at shutdown only)")(
      "server-bin", po::value(&options.server_binary),
      "towerps-server to run (default: next to this)")(
      "worker-bin", po::value(&options.worker_binary),
      "towerps-worker to run (default: next to this)")(
      "grace-ms", po::value(&grace_ms)->default_value(grace_ms),
      "how long processes get to stop after SIGTERM before SIGKILL");
  std::string cluster_file, role;
  int index = -1, servers_per_node = 0;
  bool mpi = false, slurm = false;
  po::options_description modes("Process-per-rank modes (one towerps-launch per process)");
  modes.add_options()(
      "cluster", po::value(&cluster_file),
      "cluster spec JSON ({\"ps\": [\"host:port\", ...], \"worker\": [...]}); with --role, "
      "--index. TOWERPS_CONFIG holds the same JSON plus a \"task\" entry, as TF_CONFIG")(
      "role", po::value(&role), "ps or worker (with --cluster)")(
      "index", po::value(&index), "this process's index in its --role list (with --cluster)")(
      "mpi", po::bool_switch(&mpi), "under mpirun: roles from the MPI rank")(
      "slurm", po::bool_switch(&slurm), "under srun: roles from SLURM_PROCID")(
      "servers-per-node", po::value(&servers_per_node)->default_value(0),
      "with --slurm: the first N tasks of every node are servers (instead of --servers)");
  po::options_description all(
      "Usage: towerps-launch [options]\n\n"
      "Runs a TowerPS job on this machine: --servers parameter servers and --workers workers.\n"
      "With no options it trains mlp on Fashion-MNIST with 1 server and 2 workers in sync mode");
  all.add(launch).add(modes).add(job_flags.options()).add(worker_flags.options());

  po::variables_map vm;
  Status parsed = ps::ParseFlags(argc, argv, all, &vm);
  if (!parsed.ok()) {
    std::cerr << "towerps-launch: " << parsed.message() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << all << "\n";
    return 0;
  }
  Result<ps::JobConfig> job = job_flags.ToConfig();
  Result<worker::WorkerOptions> worker = worker_flags.ToOptions();
  if (!job.ok() || !worker.ok()) {
    std::cerr << "towerps-launch: " << (job.ok() ? worker.status() : job.status()).message()
              << "\n";
    return 2;
  }
  options.job = *job;
  options.worker = *worker;
  options.grace = std::chrono::milliseconds(grace_ms);
  options.interrupt = &g_signal;

  // Process-per-rank modes: work out this process's role and become it.
  launch::Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  const bool spec_env = env.count("TOWERPS_CONFIG") > 0 && !mpi && !slurm;
  if (!cluster_file.empty() || spec_env || mpi || slurm) {
    if (vm["bind"].defaulted()) options.bind = "0.0.0.0";  // other hosts must reach the servers
    const int base_port = options.base_port ? options.base_port : 7700;
    Result<launch::RoleAssignment> assigned = InternalError("no mode");
    if (!cluster_file.empty() || spec_env) {
      std::string json = spec_env ? env["TOWERPS_CONFIG"] : "";
      if (!cluster_file.empty()) {
        std::ifstream in(cluster_file);
        if (!in) {
          std::cerr << "towerps-launch: --cluster " << cluster_file << ": cannot open the file\n";
          return 2;
        }
        json.assign(std::istreambuf_iterator<char>(in), {});
      }
      assigned = launch::RoleFromClusterSpec(
          json, role, index, cluster_file.empty() ? "TOWERPS_CONFIG" : cluster_file);
    } else if (mpi) {
      Result<launch::RankLayout> layout = launch::MpiLayout(env);
      assigned = layout.ok() ? launch::RoleFromLayout(*layout, options.job.servers, 0, base_port)
                             : Result<launch::RoleAssignment>(layout.status());
    } else {
      Result<std::vector<std::string>> nodes =
          env.count("SLURM_JOB_NODELIST")
              ? launch::ExpandSlurmNodelist(env["SLURM_JOB_NODELIST"])
              : Result<std::vector<std::string>>(
                    NotFoundError("--slurm: SLURM_JOB_NODELIST is not set; run under srun"));
      Result<launch::RankLayout> layout = nodes.ok() ? launch::SlurmLayout(env, *nodes)
                                                     : Result<launch::RankLayout>(nodes.status());
      assigned = layout.ok() ? launch::RoleFromLayout(*layout, options.job.servers,
                                                      servers_per_node, base_port)
                             : Result<launch::RoleAssignment>(layout.status());
    }
    if (!assigned.ok()) {
      std::cerr << "towerps-launch: " << assigned.status().message() << "\n";
      return 2;
    }
    // The engine decides how many processes there are; every process derives the same counts.
    options.job.servers = assigned->servers;
    options.job.workers = assigned->workers;
    if (Status s = launch::ValidateLaunchOptions(options); !s.ok()) {
      std::cerr << "towerps-launch: " << s.message() << "\n";
      return 2;
    }
    Status s = launch::ExecRole(*assigned, options);
    std::cerr << "towerps-launch: " << s.ToString() << "\n";
    return 1;
  }
  // Bad options are reported before any process starts.
  if (Status s = launch::ValidateLaunchOptions(options); !s.ok()) {
    std::cerr << "towerps-launch: " << s.message() << "\n";
    return 2;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  launch::LocalLauncher launcher(options);
  Status s = launcher.Run();
  if (!s.ok()) {
    std::cerr << "towerps-launch: " << s.ToString() << "\n";
    return g_signal.load() ? 128 + g_signal.load() : 1;
  }
  return 0;
}
