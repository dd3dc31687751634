// The launcher's questions to the worker binary it will start (the stock towerps-worker, or a
// user's --worker-bin built with towerps::WorkerMain): whether the job's model and data fit
// (--check-job), its own flags, a model's recommended settings and the names it accepts
// (--list-choices). The binary answers from its own registry, so a user's models are checked
// by the code that will train them.
//
// Contract: each call runs the binary once, bounded by its timeout; thread-compatible.
#ifndef TOWERPS_LAUNCH_WORKER_BINARY_H_
#define TOWERPS_LAUNCH_WORKER_BINARY_H_

#include <chrono>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/command_line.h"
#include "launch/launch_options.h"
#include "towerps/result.h"

namespace towerps::launch {

// Asks the worker binary (`--check-job` with the job's flags) whether --model and --dataset exist
// and fit each other; kInvalidArgument with the binary's reason when not. Data that cannot be
// read here is kInvalidArgument naming --data-dir when options.all_local; otherwise (a
// remote-only --data-dir) it is left to the workers, with a note.
Status CheckJobWithWorkerBinary(const LaunchOptions& options);

// What a worker binary printed (stdout and stderr) and its exit code, run with `argv` (the
// binary first) for at most `timeout`: how the launcher asks it about its own registry.
struct WorkerAnswer {
  int code = 0;
  std::string text;  // without trailing newlines
};
Result<WorkerAnswer> AskWorkerBinary(const std::vector<std::string>& argv,
                                     std::chrono::milliseconds timeout);

// The flags a worker binary declares of its own (its --list-choices "options").
Result<std::vector<std::pair<std::string, OptionDef>>> WorkerBinaryOptions(
    const std::string& worker_binary, std::chrono::milliseconds timeout);

// The job flags (names without "--") and values `model` recommends (ModelDef::recommended), from
// the stock registry or, with a worker binary, its --list-choices; empty for a model without
// any, an unknown one, or a binary that does not say.
Result<std::map<std::string, std::string>> RecommendedFlags(const std::string& worker_binary,
                                                            const std::string& model,
                                                            std::chrono::milliseconds timeout);

// `towerps-launch --list-choices`: the names the stock worker accepts, or, with --worker-bin,
// those that binary's registry accepts (it is asked: `B --list-choices`).
Result<std::string> ListChoices(const std::string& worker_binary,
                                std::chrono::milliseconds timeout);

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_WORKER_BINARY_H_
