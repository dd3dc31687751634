#include "worker/towers.h"

#include <algorithm>
#include <sstream>

#include "kernels/gpu_devices.h"

namespace towerps::worker {

Result<std::vector<TowerDevice>> ParseTowers(const std::string& spec, bool allow_soft_placement,
                                             std::vector<std::string>* warnings) {
  std::vector<TowerDevice> towers;
  std::stringstream ss(spec);
  std::string available;
  const std::vector<kernels::GpuInfo> gpus = kernels::ListGpus();
  available = "cpu:0";
  for (const auto& g : gpus) available += ", gpu:" + std::to_string(g.index);
  for (std::string item; std::getline(ss, item, ',');) {
    TowerDevice d;
    const size_t colon = item.find(':');
    const std::string kind = item.substr(0, colon);
    int index = -1;
    if (colon != std::string::npos) {
      try {
        size_t used = 0;
        index = std::stoi(item.substr(colon + 1), &used);
        if (used != item.size() - colon - 1) index = -1;
      } catch (...) {
        index = -1;
      }
    }
    if ((kind != "cpu" && kind != "gpu") || index < 0) {
      return InvalidArgumentError("--towers entry '" + item +
                                  "' is not cpu:N or gpu:N (e.g. --towers cpu:0,cpu:1)");
    }
    d.index = index;
    if (kind == "gpu") {
      d.kind = TowerDevice::Kind::kGpu;
      // GPU towers need the CUDA training backend (the CUDA issue); until it exists, even a
      // present GPU cannot host a tower, and says so.
      const bool exists = index < static_cast<int>(gpus.size());
      {
        const std::string why =
            !exists ? "does not exist" : "needs the CUDA training backend, not in this build yet";
        if (!allow_soft_placement) {
          return NotFoundError("--towers " + item + " " + why +
                               "; available devices: " + available);
        }
        if (warnings) warnings->push_back(item + " " + why + "; placed on cpu:0 instead");
        d = TowerDevice{};
      }
    }
    towers.push_back(d);
  }
  if (towers.empty()) return InvalidArgumentError("--towers is empty; use e.g. cpu:0");
  return towers;
}

}  // namespace towerps::worker
