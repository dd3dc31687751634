// towerps-bench job and replicas: whole towerps-launch jobs against their baselines
// (bench/job_bench.h, bench/replica_bench.h).
#include <boost/program_options.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "bench/commands.h"
#include "bench/job_bench.h"
#include "bench/replica_bench.h"

namespace po = boost::program_options;

namespace towerps::bench {

int RunJobCommand(int argc, char** argv) {
  JobBenchOptions o;
  bool json = false;
  long steps = o.steps;
  po::options_description desc("towerps-bench job options");
  desc.add_options()("help,h", "show this help")(
      "model", po::value(&o.model)->default_value(o.model), "model of the job")(
      "servers", po::value(&o.servers)->default_value(o.servers), "--servers of the job")(
      "workers", po::value(&o.workers)->default_value(o.workers),
      "--workers of the job, and threads of the single process")(
      "steps", po::value(&steps)->default_value(steps),
      "--max-steps of each job (below an epoch: no evaluation)")(
      "train-seconds", po::value(&o.train_seconds)->default_value(o.train_seconds),
      "single-process measurement per round")("repeat",
                                              po::value(&o.repeat)->default_value(o.repeat),
                                              "rounds, alternating; medians are compared")(
      "launcher-bin", po::value(&o.launcher_binary), "towerps-launch (default: beside this)")(
      "run-dir", po::value(&o.run_dir), "keep the jobs' directories here")(
      "json", po::bool_switch(&json), "one JSON line on stdout");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "towerps-bench job: " << e.what() << "\n\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "Usage: towerps-bench job [options]\n\n" << desc;
    return 0;
  }
  o.steps = steps;
  o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  auto r = RunJobBench(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench job: " << r.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    PrintJson({{"bench", "job"},
               {"model", o.model},
               {"servers", o.servers},
               {"workers", o.workers},
               {"steps", o.steps},
               {"repeat", o.repeat},
               {"tcp_examples_per_sec", Rounded(r->tcp_median, 1)},
               {"shm_examples_per_sec", Rounded(r->shm_median, 1)},
               {"single_examples_per_sec", Rounded(r->single_median, 1)},
               {"shm_over_single", Rounded(r->shm_median / r->single_median, 3)},
               {"tcp_over_single", Rounded(r->tcp_median / r->single_median, 3)}});
  } else {
    std::printf("job over TCP            %10.1f examples/s (median of %d)\n", r->tcp_median,
                o.repeat);
    std::printf("job through shm         %10.1f examples/s\n", r->shm_median);
    std::printf("one process, %d threads  %10.1f examples/s\n", o.workers, r->single_median);
    std::printf("job / one process: %.3f through shm, %.3f over TCP\n",
                r->shm_median / r->single_median, r->tcp_median / r->single_median);
  }
  return 0;
}

int RunReplicasCommand(int argc, char** argv) {
  ReplicaBenchOptions o;
  bool json = false;
  long steps = o.steps;
  po::options_description desc("towerps-bench replicas options");
  desc.add_options()("help,h", "show this help")(
      "model", po::value(&o.model)->default_value(o.model), "model of the job")(
      "servers", po::value(&o.servers)->default_value(o.servers), "--servers of the job")(
      "workers", po::value(&o.workers)->default_value(o.workers), "--workers of the job")(
      "steps", po::value(&steps)->default_value(steps), "--max-steps of each job")(
      "repeat", po::value(&o.repeat)->default_value(o.repeat),
      "jobs per side, alternating; medians are compared")(
      "launcher-bin", po::value(&o.launcher_binary), "towerps-launch (default: beside this)")(
      "run-dir", po::value(&o.run_dir), "keep the jobs' directories here")(
      "json", po::bool_switch(&json), "one JSON line on stdout");
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "towerps-bench replicas: " << e.what() << "\n\n" << desc;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << "Usage: towerps-bench replicas [options]\n\n" << desc;
    return 0;
  }
  o.steps = steps;
  o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  auto r = RunReplicaBench(o);
  if (!r.ok()) {
    std::cerr << "towerps-bench replicas: " << r.status().ToString() << "\n";
    return 1;
  }
  if (json) {
    PrintJson({{"bench", "replicas"},
               {"model", o.model},
               {"servers", o.servers},
               {"workers", o.workers},
               {"steps", o.steps},
               {"repeat", o.repeat},
               {"single_examples_per_sec", Rounded(r->single_median, 1)},
               {"replicated_examples_per_sec", Rounded(r->replicated_median, 1)},
               {"ratio", Rounded(r->ratio, 3)}});
  } else {
    std::printf("--ps-replicas 1  %10.1f examples/s (median of %d)\n", r->single_median, o.repeat);
    std::printf("--ps-replicas 2  %10.1f examples/s (median of %d)\n", r->replicated_median,
                o.repeat);
    std::printf("ratio            %10.3f (replicated / single; %.1f%% slower)\n", r->ratio,
                (1 - r->ratio) * 100);
  }
  return 0;
}

}  // namespace towerps::bench
