#include "launch/gpus.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
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

double SharedGpuFraction(int workers, int count, const std::vector<std::string>& ids) {
  std::map<std::string, int> sharing;
  int most = 0;
  for (int w = 0; w < workers; ++w) {
    std::stringstream ss(GpusForRank(w, count, ids));
    for (std::string id; std::getline(ss, id, ',');) most = std::max(most, ++sharing[id]);
  }
  if (most <= 1) return 0.0;
  return std::floor(90.0 / most) / 100.0;
}

std::vector<std::string> VisibleGpuIds() {
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
  return ids;
}

std::string GpusForRank(int local_rank, int count) {
  if (count <= 0) return "";  // a CPU job: no need to load the CUDA plugin to list GPUs
  return GpusForRank(local_rank, count, VisibleGpuIds());
}

}  // namespace towerps::launch
