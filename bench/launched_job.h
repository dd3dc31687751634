// A towerps-launch job run by a benchmark: started as a subprocess, bounded in time, and read
// back through its chief's summary (--summary-out).
//
// Contract: blocks until the job ended or `timeout` passed (then it is killed); a failed job is
// an error naming its log. Thread-compatible: no shared state.
#ifndef TOWERPS_BENCH_LAUNCHED_JOB_H_
#define TOWERPS_BENCH_LAUNCHED_JOB_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "towerps/result.h"

namespace towerps::bench {

// A benchmark's series of whole jobs: the same sync job (on Fashion-MNIST unless `dataset` says
// otherwise), `repeat` times per configuration it compares.
struct JobSeries {
  std::string launcher_binary;  // empty: towerps-launch beside this binary
  std::string model = "mlp";
  int servers = 1;
  int workers = 2;
  int64_t steps = 600;  // --max-steps of each job
  int repeat = 3;
  std::string dataset;   // --dataset of the job; empty: the launcher's default
  std::string data_dir;  // --data-dir of the job; empty: the dataset's package directory
  int batch_size = 0;    // --batch-size of each worker; 0: the launcher's default
  // More flags for every job, as one string of whitespace-separated words
  // ("--table-placement whole"); checked by the launcher, as given.
  std::string job_flags;
  std::string run_dir;  // empty: a fresh temporary directory, removed at the end
  std::chrono::seconds job_timeout{600};
  std::function<void(const std::string&)> progress;  // may be empty

  Status Validate() const;
  // --servers, --workers, --mode sync, --model and --max-steps of the job, then --dataset,
  // --data-dir and --batch-size where given, then job_flags' words.
  std::vector<std::string> SyncJobArgs() const;
  void Say(const std::string& line) const {
    if (progress) progress(line);
  }
};

// Where a series' jobs write: JobSeries::run_dir, kept; or a fresh temporary directory named
// after `prefix`, removed when this goes (on errors too).
class SeriesDir {
 public:
  SeriesDir(const JobSeries& series, const std::string& prefix);
  ~SeriesDir();
  SeriesDir(const SeriesDir&) = delete;
  SeriesDir& operator=(const SeriesDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  bool remove_;
};

// Runs `launcher` with `args` plus --run-dir and --summary-out under `dir` (created; the log is
// dir/launch.log); returns the chief's examples_per_sec. `what` names the job in errors, which
// carry the log's last lines (a series' temporary directory is gone by the time they are read).
Result<double> RunLaunchedJob(const std::string& launcher, const std::vector<std::string>& args,
                              const std::filesystem::path& dir, std::chrono::seconds timeout,
                              const std::string& what);

// The launcher beside this binary unless `given` names one; an error when it is missing.
Result<std::string> FindLauncher(const std::string& given);

double Median(std::vector<double> v);

// The median over rounds of runs[i] / baseline[i], each run over the baseline of its own round
// (rounds alternate in one invocation): the medians apart would pair a run with a baseline of
// another round, when the machine may have been faster or slower. 0 when there is no round.
double MedianRatio(const std::vector<double>& runs, const std::vector<double>& baseline);

// The whitespace-separated words of `text` (flags given as one string: no quoting, so no value
// may contain a space).
std::vector<std::string> Words(const std::string& text);

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_LAUNCHED_JOB_H_
