#include "launch/choices.h"

#include <nlohmann/json.hpp>

#include "ps/job_config.h"
#include "towerps/registry.h"

namespace towerps::launch {

std::string ChoicesJson() {
  const Registry stock = StockRegistry();
  const nlohmann::json choices = {{"modes", ps::kUpdateModes.Names()},
                                  {"models", stock.ModelNames()},
                                  {"datasets", stock.DatasetNames()},
                                  {"optimizers", ps::kOptimizerKinds.Names()},
                                  {"lr_schedules", ps::kLrScheduleKinds.Names()}};
  return choices.dump(2);
}

}  // namespace towerps::launch
