// towerps-launch: starts a TowerPS job. Local mode: M servers and N workers on this machine
// (launch/local_launcher.h). --hostfile: the same across hosts over ssh
// (launch/hostfile_launcher.h). --mpi, --slurm, --cluster, TF_CONFIG or TOWERPS_CONFIG: one
// towerps-launch per process, each becoming its role (launch/role.h, launch/rank_exec.h).
// --stdin-watchdog: the remote end of a hostfile launch (launch/stdin_watchdog.h).
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "common/job_secret.h"
#include "common/logging.h"
#include "launch/choices.h"
#include "launch/hostfile_launcher.h"
#include "launch/local_checks.h"
#include "launch/local_launcher.h"
#include "launch/rank_exec.h"
#include "launch/role.h"
#include "launch/stdin_watchdog.h"
#include "ps/job_flags.h"
#include "ps/security_flags.h"

namespace po = boost::program_options;

extern char** environ;

namespace {

std::atomic<int> g_signal{0};  // entry-point state: written by the signal handler only

void OnSignal(int sig) { g_signal.store(sig); }

// towerps-launch --stdin-watchdog [--grace-ms N] [--chdir DIR] [--gpu-rank K] -- COMMAND...
int WatchdogMain(int argc, char** argv) {
  using namespace towerps;
  launch::WatchdogOptions o;
  long grace_ms = o.grace.count();
  po::options_description desc(
      "Usage: towerps-launch --stdin-watchdog [options] -- COMMAND [ARGS...]\n\n"
      "Runs COMMAND and stops it (SIGTERM, then SIGKILL after the grace period) when stdin\n"
      "closes: the remote end of `towerps-launch --hostfile`, so an ssh session that ends takes\n"
      "its process with it");
  desc.add_options()("help,h", "show this help")("stdin-watchdog", "this mode")(
      "grace-ms", po::value(&grace_ms)->default_value(grace_ms), "SIGTERM to SIGKILL")(
      "chdir", po::value(&o.chdir), "run COMMAND in this directory when it exists")(
      "gpu-rank", po::value(&o.gpu_rank), "set CUDA_VISIBLE_DEVICES for this local rank")(
      "gpus", po::value(&o.gpu_count)->default_value(o.gpu_count), "GPUs for that rank")(
      "env", po::value(&o.env)->composing(), "NAME=value for COMMAND's environment (repeatable)")(
      "secret-from-stdin", po::bool_switch(&o.secret_from_stdin),
      "the first line of stdin is the job's secret; COMMAND gets it as TOWERPS_SECRET_FILE");
  int split = 1;
  while (split < argc && std::string(argv[split]) != "--") ++split;
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(split, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "towerps-launch --stdin-watchdog: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (split + 1 >= argc) {
    std::cerr << "towerps-launch --stdin-watchdog: give the command after --\n";
    return 2;
  }
  o.argv.assign(argv + split + 1, argv + argc);
  o.grace = std::chrono::milliseconds(grace_ms);
  o.interrupt = &g_signal;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGHUP, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  return launch::RunStdinWatchdog(o);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace towerps;
  if (argc > 1 && std::string(argv[1]) == "--stdin-watchdog") return WatchdogMain(argc, argv);
  launch::LaunchOptions options;
  launch::SshOptions ssh;
  std::string ssh_opts;
  ps::JobFlags job_flags;
  worker::WorkerFlags worker_flags;
  ps::SecurityFlags security_flags;
  std::string new_secret, log_level = "info";
  long grace_ms = options.grace.count();
  long restart_timeout_s = options.restart_timeout.count() / 1000;
  po::options_description launch("Launcher options");
  bool list_choices = false, validate_only = false, eval_only = false;
  launch.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "list-choices", po::bool_switch(&list_choices),
      "print the names --mode, --model, --dataset, --optimizer and --lr-schedule accept, as JSON, "
      "and exit")("validate-only", po::bool_switch(&validate_only),
                  "check every option as before a job (exit 0 when they are valid, 2 with the "
                  "error otherwise) and start nothing")(
      "log-level", po::value(&log_level)->default_value(log_level),
      "debug, info, warning or error: the launcher's and every server's and worker's")(
      "eval-only", po::bool_switch(&eval_only),
      "evaluate the parameters in --checkpoint-dir on the test set with the job's options, "
      "print the test accuracy and loss, and exit; no server starts (--export-npz F writes them "
      "too)")(
      "new-secret", po::value(&new_secret),
      "create a job secret in FILE (mode 0600) and exit: for --mpi, --slurm and --cluster jobs, "
      "put it on a file system every node shares and pass --secret-file FILE")(
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
      "how long processes get to stop after SIGTERM before SIGKILL")(
      "max-restarts", po::value(&options.max_restarts)->default_value(options.max_restarts),
      "local and --hostfile: restart a worker killed by a signal at most this many times (it "
      "carries on where its predecessor stopped; in sync the final parameters are "
      "bit-identical), and a server too when there is --checkpoint-dir (it restores its last "
      "checkpoint); 0: a dead process ends the job")(
      "restart-timeout", po::value(&restart_timeout_s)->default_value(restart_timeout_s),
      "seconds a restarted worker has to rejoin the job before the job fails "
      "naming it; below --rpc-timeout-ms");
  po::options_description hosts("Across hosts over ssh");
  hosts.add_options()(
      "hostfile", po::value(&ssh.hostfile),
      "one line per host: 'HOST slots=K [servers|workers]'; servers are spread over the hosts "
      "first, then workers fill the slots. Binaries must be at the same path on every host. "
      "Horovod's 'HOST:N' and OpenMPI's 'max_slots=N' are read too")(
      "hosts,H", po::value(&ssh.host_list),
      "HOST[:N],HOST[:N],...: the hosts and their slots on the command line, as horovodrun -H "
      "takes them (instead of --hostfile)")(
      "ssh-opts", po::value(&ssh_opts),
      "options for ssh, split at spaces (\"-i key -p 2222\"); not -n or -f")(
      "ssh", po::value(&ssh.ssh)->default_value(ssh.ssh), "the ssh client to run")(
      "export", po::value<std::vector<std::string>>()->composing(),
      "NAME[,NAME...]: environment variables of this shell to set for the remote processes, "
      "as mpirun -x (ssh sessions start from the host's login environment)");
  std::string cluster_file, role;
  int index = -1, servers_per_node = 0;
  bool mpi = false, slurm = false;
  po::options_description modes("Process-per-rank modes (one towerps-launch per process)");
  modes.add_options()(
      "cluster", po::value(&cluster_file),
      "cluster spec JSON ({\"ps\": [\"host:port\", ...], \"worker\": [...]}); with --role, "
      "--index. Without a mode, TF_CONFIG (or TOWERPS_CONFIG) holds the same JSON plus a "
      "\"task\" entry, as TensorFlow defines it: a \"chief\" list is worker 0")(
      "role", po::value(&role), "ps, chief or worker (with --cluster)")(
      "index", po::value(&index), "this process's index in its --role list (with --cluster)")(
      "mpi", po::bool_switch(&mpi), "under mpirun: roles from the MPI rank")(
      "slurm", po::bool_switch(&slurm), "under srun: roles from SLURM_PROCID")(
      "servers-per-node", po::value(&servers_per_node)->default_value(0),
      "with --slurm: the first N tasks of every node are servers (instead of --servers)");
  po::options_description all(
      "Usage: towerps-launch [options]\n\n"
      "Runs a TowerPS job: --servers parameter servers and --workers workers, on this machine,\n"
      "or across hosts over ssh (--hostfile), under mpirun (--mpi) or srun (--slurm), or one\n"
      "process per command from a cluster spec (--cluster, TF_CONFIG, TOWERPS_CONFIG).\n"
      "With no options it trains mlp on Fashion-MNIST with 1 server and 2 workers in sync mode");
  all.add(launch)
      .add(hosts)
      .add(modes)
      .add(security_flags.options())
      .add(job_flags.options())
      .add(worker_flags.options());

  po::variables_map vm;
  if (auto exit_code = ps::ParseCommandLine("towerps-launch", argc, argv, all, &vm)) {
    return *exit_code;
  }
  if (list_choices) {
    std::cout << launch::ChoicesJson() << "\n";
    return 0;
  }
  if (!new_secret.empty()) {
    if (Status s = JobSecret::Create(new_secret).status(); !s.ok()) {
      std::cerr << "towerps-launch: --new-secret: " << s.message() << "\n";
      return 2;
    }
    std::cout << "[launch] job secret written to " << new_secret << " (mode 0600)\n";
    return 0;
  }
  options.secret_file = security_flags.secret_file();
  options.insecure = security_flags.insecure();
  options.encrypt = security_flags.encrypt();
  if (Status s = security_flags.Validate(); !s.ok()) {
    std::cerr << "towerps-launch: " << s.message() << "\n";
    return 2;
  }
  options.transport = *security_flags.path();
  if (Result<LogLevel> level = ParseLogLevel(log_level); level.ok()) {
    options.log_level = *level;
    InitLogging({.role = "launch", .rank = -1, .min_level = *level});
  } else {
    std::cerr << "towerps-launch: --log-level: " << level.status().message() << "\n";
    return 2;
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
  options.restart_timeout = std::chrono::seconds(restart_timeout_s);
  options.interrupt = &g_signal;
  if (eval_only) {
    const Status failed = launch::ExecEvalOnly(options);
    std::cerr << "towerps-launch: " << failed.message() << "\n";
    return failed.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  if (validate_only) {
    if (Status s = launch::ValidateLaunchOptions(options); !s.ok()) {
      std::cerr << "towerps-launch: " << s.message() << "\n";
      return 2;
    }
    std::cout << "[launch] the options are valid\n";
    return 0;
  }

  // Process-per-rank modes: work out this process's role and become it.
  launch::Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  if (!ssh.hostfile.empty() && !ssh.host_list.empty()) {
    std::cerr << "towerps-launch: give the hosts once: --hostfile FILE or -H HOST:N,...\n";
    return 2;
  }
  const bool on_hosts = !ssh.hostfile.empty() || !ssh.host_list.empty();
  if (on_hosts && (!cluster_file.empty() || mpi || slurm)) {
    std::cerr << "towerps-launch: --hostfile and -H start every process themselves; they do not "
                 "combine with --cluster, --mpi or --slurm\n";
    return 2;
  }
  // TensorFlow's TF_CONFIG, or the same JSON as TOWERPS_CONFIG (which wins when both are set).
  const std::string spec_var = env.count("TOWERPS_CONFIG") ? "TOWERPS_CONFIG"
                               : env.count("TF_CONFIG")    ? "TF_CONFIG"
                                                           : "";
  const bool spec_env = !spec_var.empty() && !mpi && !slurm && !on_hosts;
  if (!cluster_file.empty() || spec_env || mpi || slurm) {
    if (options.job.ps_replicas > 1) {
      // A replica is only useful if its dead peer comes back, and here the engine (or the
      // user) owns the processes, not towerps-launch.
      std::cerr << "towerps-launch: --ps-replicas 2 needs towerps-launch to restart dead servers: "
                   "run the job locally or with --hostfile; under --mpi, --slurm and --cluster "
                   "use --checkpoint-dir to resume after a failure\n";
      return 2;
    }
    if (vm["bind"].defaulted()) options.bind = "0.0.0.0";  // other hosts must reach the servers
    const int base_port = options.base_port ? options.base_port : 7700;
    Result<launch::RoleAssignment> assigned = InternalError("no mode");
    if (!cluster_file.empty() || spec_env) {
      std::string json = spec_env ? env[spec_var] : "";
      if (!cluster_file.empty()) {
        std::ifstream in(cluster_file);
        if (!in) {
          std::cerr << "towerps-launch: --cluster " << cluster_file << ": cannot open the file\n";
          return 2;
        }
        json.assign(std::istreambuf_iterator<char>(in), {});
      }
      assigned = launch::RoleFromClusterSpec(json, role, index,
                                             cluster_file.empty() ? spec_var : cluster_file);
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
    // Every node must read the same secret: the user's file on a shared file system.
    if (!options.insecure && options.secret_file.empty() && env.count("TOWERPS_SECRET_FILE")) {
      options.secret_file = env["TOWERPS_SECRET_FILE"];
    }
    if (!options.insecure) {
      Status s = options.secret_file.empty()
                     ? InvalidArgumentError(
                           "every process of a --mpi, --slurm or --cluster job needs the same job "
                           "secret: create one with `towerps-launch --new-secret FILE` on a file "
                           "system all nodes share, then pass --secret-file FILE (or export "
                           "TOWERPS_SECRET_FILE=FILE); or pass --insecure")
                     : JobSecret::Load(options.secret_file).status().WithContext("--secret-file");
      if (!s.ok()) {
        std::cerr << "towerps-launch: " << s.message() << "\n";
        return 2;
      }
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
  if (on_hosts) {
    if (vm["bind"].defaulted()) options.bind = "0.0.0.0";
    if (options.base_port == 0) options.base_port = 7700;
    std::istringstream words(ssh_opts);
    for (std::string w; words >> w;) {
      if (w == "-n" || w == "-f") {
        std::cerr << "towerps-launch: --ssh-opts " << w
                  << " would cut the session's stdin, which stops the remote process; drop it\n";
        return 2;
      }
      ssh.ssh_opts.push_back(w);
    }
    if (vm.count("export")) {
      for (const std::string& list : vm["export"].as<std::vector<std::string>>()) {
        std::istringstream names(list);
        for (std::string name; std::getline(names, name, ',');) {
          if (name.empty()) continue;
          const char* value = std::getenv(name.c_str());
          if (value == nullptr) {
            std::cerr << "towerps-launch: --export " << name
                      << ": no such variable in this environment; set it or drop it\n";
            return 2;
          }
          ssh.env.push_back(name + "=" + value);
        }
      }
    }
  }
  // Bad options are reported before any process starts; in local mode, with what this machine
  // has (data, devices, ports).
  options.all_local = !on_hosts;
  if (Status s = launch::ValidateLaunchOptions(options); !s.ok()) {
    std::cerr << "towerps-launch: " << s.message() << "\n";
    return 2;
  }
  if (Status s = on_hosts ? Status::Ok() : launch::CheckLocalJob(options); !s.ok()) {
    std::cerr << "towerps-launch: " << s.message() << "\n";
    return 2;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  options.job_progress_bar = isatty(STDOUT_FILENO) != 0;
  Status s = on_hosts ? launch::HostfileLauncher(options, ssh).Run()
                      : launch::LocalLauncher(options).Run();
  if (!s.ok()) {
    // A failed process of the job, a timeout or a signal says what it is; "internal error"
    // is kept for bugs in TowerPS itself.
    std::cerr << "towerps-launch: "
              << (s.code() == StatusCode::kInternal ? s.ToString() : s.message()) << "\n";
    return g_signal.load() ? 128 + g_signal.load() : 1;
  }
  return 0;
}
