// towerps-bench's subcommands that live outside bench/main.cc (which parses the subcommand and
// dispatches), and the output helpers every subcommand shares.
//
// Contract: each Run*Command parses its own flags (argv[0] is the subcommand), prints its report
// to stdout (one JSON object with --json) and progress to stderr, and returns the process exit
// code: 0, 1 for a failed benchmark, 2 for bad flags.
#ifndef TOWERPS_BENCH_COMMANDS_H_
#define TOWERPS_BENCH_COMMANDS_H_

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace towerps::bench {

// --json output: one object per run, keys in the order written.
using Json = nlohmann::ordered_json;

inline void PrintJson(const Json& object) {
  std::printf("%s\n", object.dump().c_str());
  std::fflush(stdout);
}

// `v` rounded to `decimals` places: the precision each figure is reported with.
inline double Rounded(double v, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

int RunPsCommand(int argc, char** argv);          // ps_command.cc
int RunJobCommand(int argc, char** argv);         // job_commands.cc
int RunReplicasCommand(int argc, char** argv);    // job_commands.cc
int RunSparseCommand(int argc, char** argv);      // sparse_command.cc
int RunCheckpointCommand(int argc, char** argv);  // checkpoint_command.cc
int RunOptimizerCommand(int argc, char** argv);   // optimizer_command.cc

}  // namespace towerps::bench

#endif  // TOWERPS_BENCH_COMMANDS_H_
