// PullPolicy: what a worker's pulls ask for in its job's update mode - one object per kind of
// mode, as ps/server/update_rule.h is the servers' side of it. StepExchange, the trainer and
// python::Session ask it; none of them branches on the mode.
//
// Lockstep (sync): versions count the job's steps. After pushing a gradient computed from
// version v a worker pulls exactly v + 1 (never past the last step), so its progress is the
// lowest version it pulled, and the servers end training by reaching the last step; the last
// step's values are the final ones. A restarted worker that could not join at an exact version
// replaces its predecessor's pushes still pending on the servers.
//
// Latest (async, SSP, softsync): a worker pulls whatever the servers hold (SSP's bound is the
// servers', by the clock), counts its own iterations and stops after the last; the final values
// are those once every worker's iterations are in (JobConfig::FinalVersion).
//
// Contract: immutable; For() returns objects that live for the program.
#ifndef TOWERPS_WORKER_TRAIN_PULL_POLICY_H_
#define TOWERPS_WORKER_TRAIN_PULL_POLICY_H_

#include <cstdint>

#include "job/job_config.h"

namespace towerps::worker {

class PullPolicy {
 public:
  static const PullPolicy& For(ps::UpdateMode mode);
  virtual ~PullPolicy() = default;

  // The version to pull after pushing a gradient computed from `version`, training to
  // `last_step`.
  virtual int64_t NextVersion(int64_t version, int64_t last_step) const = 0;
  // Where training stands at iteration `iter` when the lowest version pulled is `lowest`: the
  // count of steps done that ends training at `last_step`.
  virtual int64_t Progress(int64_t iter, int64_t lowest) const = 0;
  // Whether the worker has no iteration after `iter` (so nothing is pulled for one).
  virtual bool RanLast(int64_t iter, int64_t last_step) const = 0;
  // Whether a variable pulled at `version` has done every step already (nothing more is pushed
  // to it): after a server came back from an older checkpoint, some ran ahead of the others.
  virtual bool PastLast(int64_t version, int64_t last_step) const = 0;
  // Whether a joining worker's first pushes replace pending ones of its predecessor: `exact`,
  // whether it joined at exactly the version its predecessor died in.
  virtual bool ReplacesPending(bool exact) const = 0;
  // Whether the values of the last step's pulls are the final ones (no final pull needed).
  virtual bool LastPullIsFinal() const = 0;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_PULL_POLICY_H_
