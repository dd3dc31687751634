#include "launch/backends/rank_launcher.h"

#include "launch/launch_flags.h"
#include "launch/rank_exec.h"

namespace towerps::launch {

RankLauncher::RankLauncher(const LaunchFlags& flags, const Environment& env, LaunchOptions options)
    : rank_flags_(flags.rank), env_(env), options_(std::move(options)) {
  if (!flags.bind_given) options_.bind = "0.0.0.0";  // other hosts must reach the servers
  options_.launcher_stops_servers = false;           // each process is on its own after the exec
}

Status RankLauncher::Check() {
  if (options_.bind_cores) {
    return InvalidArgumentError(
        "--bind-cores binds the processes the launcher starts itself; under --mpi, --slurm, "
        "--cluster or TF_CONFIG the engine starts them: use its binding (mpirun --bind-to core, "
        "srun --cpu-bind=cores)");
  }
  if (options_.job.ps_replicas > 1) {
    // A replica is only useful if its dead peer comes back, and here the engine (or the user)
    // owns the processes, not towerps-launch.
    return InvalidArgumentError(
        "--ps-replicas 2 needs towerps-launch to restart dead servers: run the job locally or "
        "with --hostfile; under --mpi, --slurm and --cluster use --checkpoint-dir to resume "
        "after a failure");
  }
  // Server r listens on base_port + r, and worker 0 keeps the collectives' rendezvous after
  // them (rank_exec.h): every process derives the same ports.
  if (options_.base_port == 0) options_.base_port = 7700;
  TOWERPS_ASSIGN_OR_RETURN(RoleAssignment role, ResolveRole(rank_flags_, env_, options_.job.servers,
                                                            options_.base_port));
  TOWERPS_RETURN_IF_ERROR(ResolveSharedSecret(env_, &options_));
  // The engine decides how many processes there are; every process derives the same counts.
  options_.job.servers = role.servers;
  options_.job.workers = role.workers;
  TOWERPS_RETURN_IF_ERROR(ValidateLaunchOptions(options_));
  role_ = std::move(role);
  return Status::Ok();
}

Status RankLauncher::Run() { return ExecRole(*role_, options_); }

LauncherBackend RankBackend() {
  return {.name = "rank",
          .applies =
              [](const LaunchFlags& flags, const Environment& env) {
                return IsRankProcess(flags.rank, env, flags.ssh.given());
              },
          .make = [](const LaunchFlags& flags, const Environment& env,
                     LaunchOptions options) -> Result<std::unique_ptr<Launcher>> {
            if (flags.ssh.given()) {
              return InvalidArgumentError(
                  "--hostfile and -H start every process themselves; they do not combine with "
                  "--cluster, --mpi or --slurm");
            }
            return std::unique_ptr<Launcher>(
                std::make_unique<RankLauncher>(flags, env, std::move(options)));
          }};
}

}  // namespace towerps::launch
