// The names a job's enumerated options accept, as `--list-choices` prints them (a worker binary
// for its own registry; towerps-launch for the stock worker's, or asks its --worker-bin), so that
// tools (experiments/) take them from the binaries instead of copying them.
//
// Contract: pure; thread-safe. Each list comes from the code that parses the option: the update
// modes, optimizers and learning-rate schedules from job/job_config.h, the models and datasets
// from the registry given.
#ifndef TOWERPS_WORKER_CHOICES_H_
#define TOWERPS_WORKER_CHOICES_H_

#include <string>

#include "towerps/registry.h"

namespace towerps::worker {

// {"modes": [...], "models": [...], "datasets": [...], "optimizers": [...],
//  "lr_schedules": [...], "options": [{"name", "help", "default"}, ...],
//  "recommended": {model: {flag: value}}}: every list in the order --help gives, as indented
// JSON; the models, datasets, options (the binary's own flags, Registry::AddOption, which
// towerps-launch passes on) and the models' recommended job flags (ModelDef::recommended, for
// the models that have some) are `registry`'s.
std::string ChoicesJson(const Registry& registry);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_CHOICES_H_
