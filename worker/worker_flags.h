// WorkerFlags: the worker's command-line and config-file options (Boost.Program_options), bound
// to a WorkerOptions. Used by the entry points (towerps-worker, towerps-launch, towerps-bench)
// only; libraries take the typed WorkerOptions (worker/worker_options.h).
//
// Contract: parse options() with ParseCommandLine (common/command_line.h), then ToOptions()
// gives the validated options or an error naming the flag. Not thread-safe.
#ifndef TOWERPS_WORKER_WORKER_FLAGS_H_
#define TOWERPS_WORKER_WORKER_FLAGS_H_

#include <boost/program_options.hpp>
#include <string>

#include "towerps/result.h"
#include "worker/worker_options.h"

namespace towerps::worker {

class WorkerFlags {
 public:
  WorkerFlags();
  WorkerFlags(const WorkerFlags&) = delete;
  WorkerFlags& operator=(const WorkerFlags&) = delete;
  const boost::program_options::options_description& options() const { return desc_; }
  Result<WorkerOptions> ToOptions() const;

 private:
  WorkerOptions options_;
  long rpc_timeout_ms_;
  long join_timeout_s_;
  std::string on_nonfinite_ = "fail";
  std::string cpu_conv_ = "auto";
  double bucket_cap_mb_ = 0.25;
  bool no_progress_bar_ = false;
  boost::program_options::options_description desc_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_WORKER_FLAGS_H_
