#include "bench/job_bench.h"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "bench/launched_job.h"
#include "bench/train_bench.h"

namespace towerps::bench {

namespace fs = std::filesystem;

Status JobBenchOptions::Validate() const {
  TOWERPS_RETURN_IF_ERROR(jobs.Validate());
  if (!(train_seconds > 0)) {
    return InvalidArgumentError("--train-seconds " + std::to_string(train_seconds) +
                                " must be > 0");
  }
  if (single_threads < 0) {
    return InvalidArgumentError("--single-threads " + std::to_string(single_threads) +
                                " must be at least 1 (or 0: as many as the job's workers)");
  }
  if (transports.empty()) return InvalidArgumentError("--transport names none: tcp, shm or both");
  for (const std::string& t : transports) {
    if (t != "tcp" && t != "shm") {
      return InvalidArgumentError("--transport '" + t + "' is not tcp, shm or both");
    }
  }
  return Status::Ok();
}

Result<JobBenchResult> RunJobBench(const JobBenchOptions& options) {
  const JobSeries& o = options.jobs;
  TOWERPS_RETURN_IF_ERROR(options.Validate());
  TOWERPS_ASSIGN_OR_RETURN(const std::string binary, FindLauncher(o.launcher_binary));
  const SeriesDir dir(o, "towerps_job");
  JobBenchResult r;
  TrainBenchOptions t;
  t.model = o.model;
  t.data_dir = o.data_dir;
  t.intra_op_threads = options.single_threads > 0 ? options.single_threads : o.workers;
  if (o.batch_size > 0) t.batch_size = o.batch_size * o.workers;  // the job's global batch
  t.seconds = options.train_seconds;
  r.single_batch = t.batch_size;
  r.single_threads = t.intra_op_threads;
  for (const std::string& flags : options.vs_flags) {
    for (const std::string& transport : options.transports) {
      r.vs.push_back({.flags = flags, .transport = transport, .runs = {}, .median = 0});
    }
  }
  // One job: its examples/s, said as `what`.
  auto job = [&](const std::string& transport, const std::string& flags,
                 const std::string& name) -> Result<double> {
    std::vector<std::string> args = o.SyncJobArgs();
    args.insert(args.end(), {"--transport", transport});
    for (std::string& word : Words(flags)) args.push_back(std::move(word));
    const std::string what = "with --transport " + transport + (flags.empty() ? "" : " " + flags);
    TOWERPS_ASSIGN_OR_RETURN(const double eps,
                             RunLaunchedJob(binary, args, dir.path() / name, o.job_timeout, what));
    o.Say("job " + what + ": " + std::to_string(static_cast<long>(eps)) + " examples/s");
    return eps;
  };
  for (int i = 0; i < o.repeat; ++i) {
    const std::string run = "run " + std::to_string(i + 1) + "/" + std::to_string(o.repeat);
    for (const std::string& transport : options.transports) {
      TOWERPS_ASSIGN_OR_RETURN(const double eps, job(transport, "", transport + std::to_string(i)));
      (transport == "tcp" ? r.tcp : r.shm).push_back(eps);
    }
    for (size_t v = 0; v < r.vs.size(); ++v) {
      TOWERPS_ASSIGN_OR_RETURN(const double eps,
                               job(r.vs[v].transport, r.vs[v].flags,
                                   "vs" + std::to_string(v) + "_" + std::to_string(i)));
      r.vs[v].runs.push_back(eps);
    }
    TOWERPS_ASSIGN_OR_RETURN(TrainBenchResult single, RunTrainBench(t));
    r.single.push_back(single.examples_per_second);
    std::string line = run + ", one process with " + std::to_string(t.intra_op_threads) +
                       " thread(s) at batch " + std::to_string(t.batch_size) + ": " +
                       std::to_string(static_cast<long>(single.examples_per_second)) +
                       " examples/s; job / one process:";
    auto add = [&](const std::string& name, double eps) {
      char ratio[32];
      std::snprintf(ratio, sizeof(ratio), " %.3f", eps / single.examples_per_second);
      line += " " + name + ratio;
    };
    for (const std::string& transport : options.transports) {
      add(transport, (transport == "tcp" ? r.tcp : r.shm).back());
    }
    for (const JobBenchResult::Vs& v : r.vs) add(v.transport + " " + v.flags, v.runs.back());
    o.Say(line);
  }
  r.tcp_median = Median(r.tcp);
  r.shm_median = Median(r.shm);
  r.single_median = Median(r.single);
  r.tcp_over_single = MedianRatio(r.tcp, r.single);
  r.shm_over_single = MedianRatio(r.shm, r.single);
  for (JobBenchResult::Vs& v : r.vs) {
    v.median = Median(v.runs);
    v.over_single = MedianRatio(v.runs, r.single);
  }
  return r;
}

}  // namespace towerps::bench
