#include "launch/launch_flags.h"

#include <iostream>

#include "common/logging.h"

namespace po = boost::program_options;

namespace towerps::launch {

LaunchFlags::LaunchFlags()
    : grace_ms_(options_.grace.count()),
      restart_timeout_s_(options_.restart_timeout.count() / 1000),
      launcher_("Launcher options"),
      hosts_("Across hosts over ssh"),
      modes_("Process-per-rank modes (one towerps-launch per process)"),
      all_(
          "Usage: towerps-launch [options]\n\n"
          "Runs a TowerPS job: --servers parameter servers and --workers workers, on this "
          "machine,\n"
          "or across hosts over ssh (--hostfile), under mpirun (--mpi) or srun (--slurm), or one\n"
          "process per command from a cluster spec (--cluster, TF_CONFIG, TOWERPS_CONFIG).\n"
          "With no options it trains mlp on Fashion-MNIST with 1 server and 2 workers in sync "
          "mode.\n\nIts options, by group") {
  AddLauncherOptions();
  AddHostOptions();
  AddRankOptions();
  all_.add(launcher_)
      .add(hosts_)
      .add(modes_)
      .add(security_flags_.options())
      .add(job_flags_.options())
      .add(worker_flags_.options());
}

void LaunchFlags::AddLauncherOptions() {
  launcher_.add_options()("help,h", "show this help")("version",
                                                      "print the version and git revision")(
      "list-choices", po::bool_switch(&list_choices),
      "print the names --mode, --model, --dataset, --optimizer and --lr-schedule accept, as JSON, "
      "and exit (with --worker-bin, that binary's models and datasets)")(
      "validate-only", po::bool_switch(&validate_only),
      "check every option as before a job (exit 0 when they are valid, 2 with the "
      "error otherwise) and start nothing")(
      "log-level", po::value(&log_level_)->default_value(log_level_),
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
      "run-dir", po::value(&options_.run_dir),
      "directory for logs (default runs/<date>-<time>-<pid>)")(
      "bind", po::value(&options_.bind)->default_value(options_.bind), "address servers listen on")(
      "base-port", po::value(&options_.base_port)->default_value(0),
      "server r listens on base-port + r; 0 picks free ports")(
      "server-threads", po::value(&options_.server_threads)->default_value("auto"),
      "--threads per server: N, or auto (each server takes half its host's cores, 1 to 8)")(
      "bind-cores", po::bool_switch(&options_.bind_cores),
      "local: run each worker on its own slice of this machine's cores (whole cores; with more "
      "workers than cores they share slices in turn), and server j on worker j's slice, so that "
      "sync workers compute at once (dlrm_small, 2 workers and 2 servers on 2 cores: 1.03-1.4x "
      "the examples/s; not always faster, docs/PERFORMANCE.md); under mpirun or srun, use "
      "theirs (mpirun --bind-to core, srun --cpu-bind=cores)")(
      "checkpoint-dir", po::value(&options_.checkpoint_dir),
      "servers checkpoint here and resume from it")(
      "table-dir", po::value(&options_.table_dir),
      "tables with --table-storage rocksdb: an existing, writable directory on each server's "
      "host, where server r keeps its disk tier in ps-<r>")(
      "shutdown-grace-ms",
      po::value(&options_.shutdown_grace_ms)->default_value(options_.shutdown_grace_ms),
      "--mpi, --slurm, --cluster: once the chief asks the servers to stop, they wait at most "
      "this long for the other workers to finish")(
      "orphan-timeout-ms",
      po::value(&options_.orphan_timeout_ms)->default_value(options_.orphan_timeout_ms),
      "a server that hears from no worker for this long stops, failing and naming them, so "
      "that none outlives a job whose workers died (--mpi, --slurm, --cluster, where no "
      "launcher stays behind to stop them); raise it for workers that start slowly (0: never)")(
      "checkpoint-every", po::value(&options_.checkpoint_every)->default_value(0),
      "versions between checkpoints (0: at shutdown only)")(
      "checkpoint-full-every", po::value(&options_.checkpoint_full_every)->default_value(1),
      "every K-th checkpoint is full; those between are deltas of the table rows changed since "
      "the one before, so a checkpoint of a large table costs what a step changed (1: all full)")(
      "server-bin", po::value(&options_.server_binary),
      "towerps-server to run (default: next to this)")(
      "worker-bin", po::value(&options_.worker_binary),
      "towerps-worker to run (default: next to this)")(
      "worker-cmd", po::value(&options_.worker_cmd),
      "run this command as every worker instead of a worker binary: a PyTorch script using the "
      "towerps package, e.g. \"python3 train.py --epochs 2\" (README: Your PyTorch model). "
      "--model and --dataset then only name the run")(
      "worker-allocator", po::value(&worker_allocator_)->default_value(worker_allocator_),
      "the malloc of --worker-cmd workers' processes: tcmalloc (preloaded, as TowerPS's own "
      "programs link it), system (the C library's), or auto: tcmalloc where this build and the "
      "worker's host have it")("grace-ms", po::value(&grace_ms_)->default_value(grace_ms_),
                               "how long processes get to stop after SIGTERM before SIGKILL")(
      "max-restarts", po::value(&options_.max_restarts)->default_value(options_.max_restarts),
      "local and --hostfile: restart a worker killed by a signal at most this many times (it "
      "carries on where its predecessor stopped; in sync the final parameters are "
      "bit-identical), and a server too when there is --checkpoint-dir (it restores its last "
      "checkpoint); 0: a dead process ends the job")(
      "restart-timeout", po::value(&restart_timeout_s_)->default_value(restart_timeout_s_),
      "seconds a restarted worker has to rejoin the job before the job fails "
      "naming it; below --rpc-timeout-ms");
}

void LaunchFlags::AddHostOptions() {
  hosts_.add_options()(
      "hostfile", po::value(&ssh.hostfile),
      "one line per host: 'HOST slots=K [servers|workers]'; servers are spread over the hosts "
      "first, then workers fill the slots. Binaries must be at the same path on every host. "
      "Horovod's 'HOST:N' and OpenMPI's 'max_slots=N' are read too")(
      "hosts,H", po::value(&ssh.host_list),
      "HOST[:N],HOST[:N],...: the hosts and their slots on the command line, as horovodrun -H "
      "takes them (instead of --hostfile)")(
      "ssh-opts", po::value(&ssh.ssh_opts),
      "options for ssh, split at spaces (\"-i key -p 2222\"); not -n or -f")(
      "ssh", po::value(&ssh.ssh)->default_value(ssh.ssh), "the ssh client to run")(
      "export", po::value(&ssh.exports)->composing(),
      "NAME[,NAME...]: environment variables of this shell to set for the remote processes, "
      "as mpirun -x (ssh sessions start from the host's login environment)");
}

void LaunchFlags::AddRankOptions() {
  modes_.add_options()(
      "cluster", po::value(&rank.cluster_file),
      "cluster spec JSON ({\"ps\": [\"host:port\", ...], \"worker\": [...]}); with --role, "
      "--index. Without a mode, TF_CONFIG (or TOWERPS_CONFIG) holds the same JSON plus a "
      "\"task\" entry, as TensorFlow defines it: a \"chief\" list is worker 0")(
      "role", po::value(&rank.role), "ps, chief or worker (with --cluster)")(
      "index", po::value(&rank.index), "this process's index in its --role list (with --cluster)")(
      "mpi", po::bool_switch(&rank.mpi), "under mpirun: roles from the MPI rank")(
      "slurm", po::bool_switch(&rank.slurm), "under srun: roles from SLURM_PROCID")(
      "servers-per-node", po::value(&rank.servers_per_node)->default_value(0),
      "with --slurm: the first N tasks of every node are servers (instead of --servers)");
}

Status LaunchFlags::AddWorkerBinaryOptions(
    const std::string& binary, const std::vector<std::pair<std::string, OptionDef>>& options) {
  if (options.empty()) return Status::Ok();
  po::options_description own("Options of --worker-bin " + binary + " (passed to its workers)");
  for (const auto& [name, def] : options) {
    if (all_.find_nothrow(name, /*approx=*/false) != nullptr) {
      return InvalidArgumentError("--worker-bin " + binary + " declares a flag --" + name +
                                  ", which is towerps-launch's own; rename it in its registry");
    }
    worker_binary_values_[name] = def.default_value;
    own.add_options()(name.c_str(),
                      po::value(&worker_binary_values_[name])->default_value(def.default_value),
                      def.help.c_str());
  }
  all_.add(own);
  return Status::Ok();
}

Result<LaunchOptions> LaunchFlags::ToOptions(const po::variables_map& vm) {
  LaunchOptions o = options_;
  // The --worker-bin's own flags that were given go to every worker (its defaults are its own).
  for (const auto& [name, value] : worker_binary_values_) {
    if (vm.count(name) && !vm[name].defaulted()) {
      o.worker_binary_args.insert(o.worker_binary_args.end(), {"--" + name, value});
    }
  }
  TOWERPS_RETURN_IF_ERROR(security_flags_.Validate());
  o.secret_file = security_flags_.secret_file();
  o.insecure = security_flags_.insecure();
  o.encrypt = security_flags_.encrypt();
  o.transport = *security_flags_.path();
  TOWERPS_ASSIGN_OR_RETURN(o.log_level, ParseLogLevel(log_level_));
  TOWERPS_ASSIGN_OR_RETURN(o.job, job_flags_.ToConfig(vm));
  TOWERPS_ASSIGN_OR_RETURN(o.worker, worker_flags_.ToOptions());
  o.grace = std::chrono::milliseconds(grace_ms_);
  o.restart_timeout = std::chrono::seconds(restart_timeout_s_);
  TOWERPS_ASSIGN_OR_RETURN(o.worker_allocator, ParseWorkerAllocator(worker_allocator_));
  if (!vm["worker-allocator"].defaulted() && o.worker_cmd.empty()) {
    return InvalidArgumentError(
        "--worker-allocator " + worker_allocator_ +
        " is for --worker-cmd workers; towerps-worker links its allocator when built "
        "(-DTOWERPS_TCMALLOC): drop the flag or give --worker-cmd");
  }
  bind_given = !vm["bind"].defaulted();
  if (vm.count("worker-cmd") && o.worker_cmd.find_first_not_of(" \t") == std::string::npos) {
    return InvalidArgumentError(
        "--worker-cmd is empty: give the command every worker runs, in quotes (--worker-cmd "
        "\"python3 train.py\"), or leave the flag out for towerps-worker");
  }
  if (!o.worker_cmd.empty()) {
    // The script's model and data are its own: the run is named so unless the job says.
    if (vm["model"].defaulted()) o.job.model = "pytorch";
    if (vm["dataset"].defaulted()) o.job.dataset = "script";
  }
  return o;
}

}  // namespace towerps::launch
