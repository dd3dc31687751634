// RankLauncher: one process of a process-per-rank job, started by an engine the user runs
// (--mpi, --slurm, --cluster, TF_CONFIG, TOWERPS_CONFIG): works out the process's role
// (launch/role.h) and becomes it (launch/rank_exec.h). Every process derives the same counts
// from the engine, and must read the same job secret.
//
// Contract: a Launcher (launch/backends/launcher.h) that does not supervise: Run() execs, and
// returns only when the exec failed.
#ifndef TOWERPS_LAUNCH_BACKENDS_RANK_LAUNCHER_H_
#define TOWERPS_LAUNCH_BACKENDS_RANK_LAUNCHER_H_

#include <optional>

#include "launch/backends/launcher.h"

namespace towerps::launch {

class RankLauncher final : public Launcher {
 public:
  RankLauncher(const LaunchFlags& flags, const Environment& env, LaunchOptions options);
  // --ps-replicas 2 refused (the engine, not this launcher, owns the processes); the role; the
  // shared secret; the options with the engine's counts.
  Status Check() override;
  Status Run() override;
  bool supervises() const override { return false; }

 private:
  const RankModeFlags rank_flags_;
  const Environment env_;
  LaunchOptions options_;
  std::optional<RoleAssignment> role_;  // found by Check
};

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_BACKENDS_RANK_LAUNCHER_H_
