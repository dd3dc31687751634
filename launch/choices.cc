#include "launch/choices.h"

#include <nlohmann/json.hpp>

#include "ps/job_config.h"
#include "towerps/registry.h"

namespace towerps::launch {

std::string ChoicesJson() {
  using ps::LrScheduleKind;
  using ps::OptimizerKind;
  using ps::UpdateMode;
  nlohmann::json modes = nlohmann::json::array(), optimizers = nlohmann::json::array(),
                 schedules = nlohmann::json::array();
  for (UpdateMode m :
       {UpdateMode::kSync, UpdateMode::kAsync, UpdateMode::kSsp, UpdateMode::kSoftsync}) {
    modes.push_back(ps::UpdateModeName(m));
  }
  for (OptimizerKind k : {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam,
                          OptimizerKind::kAdagrad}) {
    optimizers.push_back(ps::OptimizerKindName(k));
  }
  for (LrScheduleKind k :
       {LrScheduleKind::kConstant, LrScheduleKind::kStep, LrScheduleKind::kExponential}) {
    schedules.push_back(ps::LrScheduleKindName(k));
  }
  const Registry stock = StockRegistry();
  const nlohmann::json choices = {{"modes", modes},
                                  {"models", stock.ModelNames()},
                                  {"datasets", stock.DatasetNames()},
                                  {"optimizers", optimizers},
                                  {"lr_schedules", schedules}};
  return choices.dump(2);
}

}  // namespace towerps::launch
