#include "worker/choices.h"

#include <nlohmann/json.hpp>

#include "job/job_config.h"

namespace towerps::worker {

std::string ChoicesJson(const Registry& registry) {
  nlohmann::json options = nlohmann::json::array();
  for (const auto& [name, def] : registry.options()) {
    options.push_back({{"name", name}, {"help", def.help}, {"default", def.default_value}});
  }
  nlohmann::json recommended = nlohmann::json::object();
  for (const std::string& model : registry.ModelNames()) {
    const ModelDef* def = registry.FindModel(model);
    if (!def->recommended.empty()) recommended[model] = def->recommended;
  }
  const nlohmann::json choices = {{"modes", ps::kUpdateModes.Names()},
                                  {"models", registry.ModelNames()},
                                  {"datasets", registry.DatasetNames()},
                                  {"optimizers", ps::kOptimizerKinds.Names()},
                                  {"lr_schedules", ps::kLrScheduleKinds.Names()},
                                  {"options", options},
                                  {"recommended", recommended}};
  return choices.dump(2);
}

}  // namespace towerps::worker
