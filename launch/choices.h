// The names towerps-launch accepts for its enumerated options, as `towerps-launch
// --list-choices` prints them, so that tools (experiments/) take them from the binaries instead
// of copying them.
//
// Contract: pure; thread-safe. Each list comes from the code that parses the option: the update
// modes, optimizers and learning-rate schedules from ps/job_config.h, the models from the zoo
// (worker/model/zoo.h). The datasets have no such list in worker/train/job_data.h; DatasetNames()
// mirrors LoadJobData's names, and tests/launch/choices_test.cc checks it against LoadJobData.
#ifndef TOWERPS_LAUNCH_CHOICES_H_
#define TOWERPS_LAUNCH_CHOICES_H_

#include <string>
#include <vector>

namespace towerps::launch {

// What --dataset accepts (worker::LoadJobData).
std::vector<std::string> DatasetNames();

// {"modes": [...], "models": [...], "datasets": [...], "optimizers": [...],
//  "lr_schedules": [...]}: every list in the order --help gives, as indented JSON.
std::string ChoicesJson();

}  // namespace towerps::launch

#endif  // TOWERPS_LAUNCH_CHOICES_H_
