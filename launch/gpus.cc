#include "launch/gpus.h"

#include <cstdlib>
#include <sstream>
#include <vector>

#include "kernels/gpu_devices.h"

namespace towerps::launch {

std::string GpuForRank(int rank) {
  const std::vector<kernels::GpuInfo> gpus = kernels::ListGpus();
  if (gpus.empty()) return "";
  std::vector<std::string> ids;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible && *visible) {
    std::stringstream ss(visible);
    for (std::string id; std::getline(ss, id, ',');) ids.push_back(id);
  }
  const auto& gpu = gpus[static_cast<size_t>(rank) % gpus.size()];
  return static_cast<size_t>(gpu.index) < ids.size() ? ids[gpu.index] : std::to_string(gpu.index);
}

}  // namespace towerps::launch
