// The names towerps-launch accepts for its enumerated options, as `towerps-launch
// --list-choices` prints them, so that tools (experiments/) take them from the binaries instead
// of copying them.
//
// Contract: pure; thread-safe. Each list comes from the code that parses the option: the update
// modes, optimizers and learning-rate schedules from ps/job_config.h, the models
// and datasets of the stock worker (StockRegistry, <towerps/registry.h>).
#ifndef TOWERPS_LAUNCH_CHOICES_H_
#define TOWERPS_LAUNCH_CHOICES_H_

#include <string>
#include <vector>

namespace towerps::launch {

// {"modes": [...], "models": [...], "datasets": [...], "optimizers": [...],
//  "lr_schedules": [...]}: every list in the order --help gives, as indented JSON.
std::string ChoicesJson();

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_CHOICES_H_
