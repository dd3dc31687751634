#include "worker/choices.h"

#include <nlohmann/json.hpp>

#include "ps/job_config.h"

namespace towerps::worker {

std::string ChoicesJson(const Registry& registry) {
  const nlohmann::json choices = {{"modes", ps::kUpdateModes.Names()},
                                  {"models", registry.ModelNames()},
                                  {"datasets", registry.DatasetNames()},
                                  {"optimizers", ps::kOptimizerKinds.Names()},
                                  {"lr_schedules", ps::kLrScheduleKinds.Names()}};
  return choices.dump(2);
}

}  // namespace towerps::worker
