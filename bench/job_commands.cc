// towerps-bench job and replicas: whole towerps-launch jobs against their baselines
// (bench/job_bench.h, bench/replica_bench.h).
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "bench/commands.h"
#include "bench/job_bench.h"
#include "bench/replica_bench.h"
#include "job/job_flags.h"

namespace po = boost::program_options;

namespace towerps::bench {
namespace {

// The flags of a series of jobs; `steps` is parsed as a long and copied in afterwards.
void AddSeriesFlags(po::options_description& desc, JobSeries* s, long* steps, bool* json) {
  desc.add_options()("help,h", "show this help")("version", "print the version and git revision")(
      "model", po::value(&s->model)->default_value(s->model), "model of the job")(
      "servers", po::value(&s->servers)->default_value(s->servers), "--servers of the job")(
      "workers", po::value(&s->workers)->default_value(s->workers), "--workers of the job")(
      "steps", po::value(steps)->default_value(*steps), "--max-steps of each job")(
      "repeat", po::value(&s->repeat)->default_value(s->repeat),
      "rounds, alternating the configurations; a ratio is the median of the rounds' ratios")(
      "launcher-bin", po::value(&s->launcher_binary), "towerps-launch (default: beside this)")(
      "run-dir", po::value(&s->run_dir), "keep the jobs' directories here")(
      "json", po::bool_switch(json), "one JSON line on stdout");
}

// Parses the command line into `s`; the exit code when the command stops here.
std::optional<int> ParseSeries(const std::string& program, int argc, char** argv,
                               po::options_description& desc, JobSeries* s, long* steps) {
  po::variables_map vm;
  if (auto code = ParseCommandLine(program, argc, argv, desc, &vm)) return code;
  s->steps = *steps;
  s->progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  return std::nullopt;
}

Json SeriesJson(const std::string& bench, const JobSeries& s) {
  return {{"bench", bench},       {"model", s.model}, {"servers", s.servers},
          {"workers", s.workers}, {"steps", s.steps}, {"repeat", s.repeat}};
}

// towerps-bench job's figures as one JSON object.
Json JobJson(const JobSeries& s, const JobBenchResult& r) {
  Json j = SeriesJson("job", s);
  j["single_examples_per_sec"] = Rounded(r.single_median, 1);
  j["single_batch"] = r.single_batch;
  j["single_threads"] = r.single_threads;
  if (!r.tcp.empty()) {
    j["tcp_examples_per_sec"] = Rounded(r.tcp_median, 1);
    j["tcp_over_single"] = Rounded(r.tcp_over_single, 3);
  }
  if (!r.shm.empty()) {
    j["shm_examples_per_sec"] = Rounded(r.shm_median, 1);
    j["shm_over_single"] = Rounded(r.shm_over_single, 3);
  }
  if (!r.vs.empty()) {
    Json vs = Json::array();
    for (const JobBenchResult::Vs& v : r.vs) {
      vs.push_back({{"flags", v.flags},
                    {"transport", v.transport},
                    {"examples_per_sec", Rounded(v.median, 1)},
                    {"over_single", Rounded(v.over_single, 3)}});
    }
    j["vs"] = vs;
  }
  return j;
}

// The same as lines of text.
void PrintJobResult(const JobSeries& s, const JobBenchResult& r) {
  if (!r.tcp.empty()) {
    std::printf("job over TCP            %10.1f examples/s (median of %d)\n", r.tcp_median,
                s.repeat);
  }
  if (!r.shm.empty()) {
    std::printf("job through shm         %10.1f examples/s (median of %d)\n", r.shm_median,
                s.repeat);
  }
  std::printf("one process, %d thread(s), batch %d %10.1f examples/s\n", r.single_threads,
              r.single_batch, r.single_median);
  if (!r.tcp.empty())
    std::printf("job / one process over TCP: %.3f (median of the rounds' ratios)\n",
                r.tcp_over_single);
  if (!r.shm.empty()) {
    std::printf("job / one process through shm: %.3f (median of the rounds' ratios)\n",
                r.shm_over_single);
  }
  for (const JobBenchResult::Vs& v : r.vs) {
    std::printf(
        "job %s over %s: %.1f examples/s (median of %d), %.3f of one process (median of the "
        "rounds' ratios)\n",
        v.flags.c_str(), v.transport.c_str(), v.median, s.repeat, v.over_single);
  }
}

}  // namespace

int RunJobCommand(int argc, char** argv) {
  JobBenchOptions o;
  const JobSeries& s = o.jobs;
  bool json = false;
  long steps = o.jobs.steps;
  std::string transport = "both";
  po::options_description desc(
      "Usage: towerps-bench job [options]\n\nThe main job over TCP and through shared memory, "
      "and one process training with as many\nthreads as the job has workers (at the job's "
      "global batch with --batch-size; with train's\noptimizers, and the data its model "
      "implies); --steps stays below an epoch so that no\nevaluation is timed. The "
      "recommendation comparison (one process with local tables):\n  towerps-bench job "
      "--model dlrm_small --dataset criteo --data-dir DIR --servers 2 --workers 2\n    "
      "--batch-size 128 --steps 600 --single-threads 1 --transport shm "
      "--job-flags=\"--table-placement whole\"\n\nOptions");
  AddSeriesFlags(desc, &o.jobs, &steps, &json);
  desc.add_options()("train-seconds", po::value(&o.train_seconds)->default_value(o.train_seconds),
                     "single-process measurement per round")(
      "dataset", po::value(&o.jobs.dataset),
      "--dataset of the job (a click model's: criteo); default: the launcher's")(
      "data-dir", po::value(&o.jobs.data_dir),
      "the dataset's directory, for the job and the one process")(
      "batch-size", po::value(&o.jobs.batch_size)->default_value(0),
      "each worker's batch; the one process trains at workers x this (0: the defaults)")(
      "job-flags", po::value(&o.jobs.job_flags),
      "more flags for every job, as one string of words (no value with a space): "
      "--job-flags=\"--table-placement whole\"")(
      "vs-flags", po::value(&o.vs_flags),
      "a configuration compared in every round: the job with these flags too, as one string "
      "(--vs-flags=--bind-cores); may be given more than once")(
      "single-threads", po::value(&o.single_threads)->default_value(0),
      "the one process's intra-op threads (0: as many as the job's workers)")(
      "transport", po::value(&transport)->default_value(transport),
      "the job's transports: tcp, shm or both");
  if (auto code = ParseSeries("towerps-bench job", argc, argv, desc, &o.jobs, &steps)) {
    return *code;
  }
  if (transport != "both") o.transports = {transport};
  auto r = RunJobBench(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench job: " << r.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    PrintJson(JobJson(s, *r));
  } else {
    PrintJobResult(s, *r);
  }
  return 0;
}

int RunReplicasCommand(int argc, char** argv) {
  ReplicaBenchOptions o;
  const JobSeries& s = o.jobs;
  bool json = false;
  long steps = o.jobs.steps;
  po::options_description desc(
      "Usage: towerps-bench replicas [options]\n\nThe main job with and without --ps-replicas "
      "2.\n\nOptions");
  AddSeriesFlags(desc, &o.jobs, &steps, &json);
  if (auto code = ParseSeries("towerps-bench replicas", argc, argv, desc, &o.jobs, &steps)) {
    return *code;
  }
  auto r = RunReplicaBench(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench replicas: " << r.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    Json j = SeriesJson("replicas", s);
    j["single_examples_per_sec"] = Rounded(r->single_median, 1);
    j["replicated_examples_per_sec"] = Rounded(r->replicated_median, 1);
    j["ratio"] = Rounded(r->ratio, 3);
    PrintJson(j);
    return 0;
  }
  std::printf("--ps-replicas 1  %10.1f examples/s (median of %d)\n", r->single_median, s.repeat);
  std::printf("--ps-replicas 2  %10.1f examples/s (median of %d)\n", r->replicated_median,
              s.repeat);
  std::printf("ratio            %10.3f (replicated / single; %.1f%% slower)\n", r->ratio,
              (1 - r->ratio) * 100);
  return 0;
}

}  // namespace towerps::bench
