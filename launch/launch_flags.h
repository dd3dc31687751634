// LaunchFlags: towerps-launch's command line. The flag tables (the launcher's own, hosts over
// ssh, the process-per-rank modes, security, job and worker) bound to one object, and their
// values resolved into the typed LaunchOptions, SshFlags and RankModeFlags that the modes take.
//
// Contract: used by towerps-launch's main() only (libraries take the typed options). Parse the
// description with ParseCommandLine (common/command_line.h), then call ToOptions. Errors are
// kInvalidArgument naming the flag and its value. Not thread-safe.
#ifndef TOWERPS_LAUNCH_LAUNCH_FLAGS_H_
#define TOWERPS_LAUNCH_LAUNCH_FLAGS_H_

#include <boost/program_options.hpp>
#include <map>
#include <string>
#include <vector>

#include "job/job_flags.h"
#include "job/security_flags.h"
#include "launch/launch_options.h"
#include "launch/role.h"
#include "launch/ssh_options.h"
#include "launch/worker_binary.h"
#include "towerps/registry.h"
#include "towerps/result.h"
#include "worker/worker_flags.h"

namespace towerps::launch {

class LaunchFlags {
 public:
  LaunchFlags();
  LaunchFlags(const LaunchFlags&) = delete;
  LaunchFlags& operator=(const LaunchFlags&) = delete;

  const boost::program_options::options_description& description() const { return all_; }
  // After parsing: the options every mode shares (security, log level, job, worker, times).
  Result<LaunchOptions> ToOptions(const boost::program_options::variables_map& vm);
  // Before parsing: the --worker-bin's own flags (Registry::AddOption, as its --list-choices
  // gives them), accepted from now on, shown by --help, and passed to every worker when given.
  // kInvalidArgument for one named as a flag of the launcher.
  Status AddWorkerBinaryOptions(const std::string& binary,
                                const std::vector<std::pair<std::string, OptionDef>>& options);

  // What to do instead of a job.
  bool list_choices = false, validate_only = false, eval_only = false;
  std::string new_secret;  // --new-secret FILE
  SshFlags ssh;
  RankModeFlags rank;
  bool bind_given = false;  // --bind was given (the modes across hosts default to 0.0.0.0)

 private:
  void AddLauncherOptions();
  void AddHostOptions();
  void AddRankOptions();

  LaunchOptions options_;
  long grace_ms_, restart_timeout_s_;
  std::string log_level_ = "info";
  std::string worker_allocator_ = "auto";
  ps::JobFlags job_flags_;
  worker::WorkerFlags worker_flags_;
  ps::SecurityFlags security_flags_;
  boost::program_options::options_description launcher_, hosts_, modes_, all_;
  std::map<std::string, std::string> worker_binary_values_;  // its own flags, by name
};

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_LAUNCH_FLAGS_H_
