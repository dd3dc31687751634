// Becomes the process a RoleAssignment names: execs towerps-server or towerps-worker with the
// job's options, the role's rank and endpoints, and the GPU of its local rank.
//
// When the workers cannot know the servers' hosts (MPI across nodes), the servers publish
// "tcp://<hostname>:<port>" in <run_dir>/ps-<r>.endpoint before they start, and workers wait
// (up to the startup timeout) for every file: run_dir must then be on a shared file system.
//
// Contract: returns only on failure (the exec did not happen); never returns OK.
#ifndef TOWERPS_LAUNCH_RANK_EXEC_H_
#define TOWERPS_LAUNCH_RANK_EXEC_H_

#include "launch/launch_options.h"
#include "launch/role.h"

namespace towerps::launch {

Status ExecRole(const RoleAssignment& role, const LaunchOptions& options);

// Every process of a --mpi, --slurm or --cluster job must read the same job secret: the user's
// --secret-file, else TOWERPS_SECRET_FILE from `env`, on a file system all nodes share; it must
// load. kInvalidArgument saying how to make one. Nothing to do with --insecure.
Status ResolveSharedSecret(const Environment& env, LaunchOptions* options);

// --eval-only: becomes `towerps-worker --eval-only` on options.checkpoint_dir, with the job's
// and the workers' options; no server starts. kInvalidArgument without a checkpoint directory.
Status ExecEvalOnly(const LaunchOptions& options);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_RANK_EXEC_H_
