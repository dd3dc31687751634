#include "launch/gpus.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "kernels/gpu_devices.h"
#include "worker/tower_devices.h"

namespace towerps::launch {

int GpusNeeded(const std::string& towers) {
  const Result<std::vector<worker::TowerDevice>> list = worker::ParseTowerList(towers);
  if (!list.ok()) return 0;
  int needed = 0;
  for (const worker::TowerDevice& t : *list) {
    if (t.kind == worker::TowerDevice::Kind::kGpu) needed = std::max(needed, t.index + 1);
  }
  return needed;
}

std::string GpusForRank(int local_rank, int count, const std::vector<std::string>& ids) {
  if (ids.empty() || count <= 0) return "";
  const size_t n = ids.size();
  const size_t k = std::min<size_t>(static_cast<size_t>(count), n);
  std::string out;
  for (size_t j = 0; j < k; ++j) {
    const size_t at = (static_cast<size_t>(local_rank) * k + j) % n;
    out += (out.empty() ? "" : ",") + ids[at];
  }
  return out;
}

std::string GpusForRank(int local_rank, int count) {
  if (count <= 0) return "";  // a CPU job: no need to load the CUDA plugin to list GPUs
  const std::vector<kernels::GpuInfo> gpus = kernels::ListGpus();
  std::vector<std::string> user;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible && *visible) {
    std::stringstream ss(visible);
    for (std::string id; std::getline(ss, id, ',');) user.push_back(id);
  }
  std::vector<std::string> ids;
  for (const kernels::GpuInfo& g : gpus) {
    ids.push_back(static_cast<size_t>(g.index) < user.size() ? user[g.index]
                                                             : std::to_string(g.index));
  }
  return GpusForRank(local_rank, count, ids);
}

}  // namespace towerps::launch
