// Towers: the devices one worker drives, from --towers ("cpu:0,cpu:1", "gpu:0,gpu:1").
//
// Each tower computes on its slice of the worker's batch with its own copy of the parameters;
// the worker averages the towers' gradients before pushing. CPU towers are threads. GPU towers
// need the CUDA backend: asking for one that does not exist is an error listing the devices
// there are (with allow_soft_placement, a warning and a fallback to cpu:0 instead).
#ifndef TOWERPS_WORKER_TOWERS_H_
#define TOWERPS_WORKER_TOWERS_H_

#include <string>
#include <vector>

#include "common/result.h"

namespace towerps::worker {

struct TowerDevice {
  enum class Kind { kCpu, kGpu } kind = Kind::kCpu;
  int index = 0;
  std::string name() const {
    return (kind == Kind::kCpu ? "cpu:" : "gpu:") + std::to_string(index);
  }
};

// Parses and checks the list against what this machine has. `warnings` receives soft-placement
// notes. Errors are kInvalidArgument (syntax, duplicates) or kNotFound (missing device).
Result<std::vector<TowerDevice>> ParseTowers(const std::string& spec, bool allow_soft_placement,
                                             std::vector<std::string>* warnings);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TOWERS_H_
