// What a launched job leaves on disk and reads back: its run directory (made, or an earlier
// run's files set aside), job.json, the job secret it makes, the restarts it records in the
// chief's summary, and the RestartPolicy that tells restarted workers where to report.
//
// Contract: free functions; errors are kIoError or kInvalidArgument naming the path.
#ifndef TOWERPS_LAUNCH_JOB_RECORD_H_
#define TOWERPS_LAUNCH_JOB_RECORD_H_

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "launch/job_supervisor.h"
#include "launch/launch_options.h"
#include "towerps/result.h"

namespace towerps::launch {

// The job's secret file as an absolute path: options.secret_file (checked to be loadable), or a
// new one, "<run_dir>/secret" (mode 0600). Empty with --insecure.
Result<std::string> PrepareJobSecret(const LaunchOptions& options, const std::string& run_dir);

// How the supervisor of a local or hostfile job restarts its workers (see RestartPolicy).
RestartPolicy MakeRestartPolicy(const LaunchOptions& options, const std::string& run_dir,
                                bool workers_local);

// Adds "restarts" (their number) and "restarted" ({"worker:2": 1}) to the chief's JSON summary
// (--summary-out), if it asked for one and restarts happened. An error only if it cannot be
// rewritten.
Status RecordRestartsInSummary(const LaunchOptions& options,
                               const std::map<std::string, int>& restarts);

// runs/<date>-<time>-<pid>, relative to the working directory.
std::string DefaultRunDir();
// Creates the run directory and says where it is ("[launch] run directory: ..."). A directory
// used before keeps the earlier run's files in previous-<k>/ (said too), so a rerun into it
// starts clean (a new job secret, new logs) and loses nothing.
Status CreateRunDir(const std::string& run_dir);
// Writes <run_dir>/job.json: the launcher's command line as given ("command"), every job option
// as resolved ("job", only the mode's own), the workers' options that differ from their defaults
// ("worker_options"), the transport and the TowerPS version. kIoError when it cannot.
Status WriteJobRecord(const LaunchOptions& options, const std::string& run_dir);
// Whether `run_dir` can be made (or used): kInvalidArgument naming the part of the path that is
// not a directory or not writable. CreateRunDir checks it first; the launchers' Check() too.
Status CheckRunDir(const std::string& run_dir);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_JOB_RECORD_H_
