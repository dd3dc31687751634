#include "worker/towers.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/gpu_devices.h"
#ifdef TOWERPS_WITH_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace towerps::worker {

Result<std::vector<TowerDevice>> ParseTowers(const std::string& spec, bool allow_soft_placement,
                                             std::vector<std::string>* warnings, int gpu_limit) {
  std::string why_no_gpu;
  const std::vector<kernels::GpuInfo> visible = kernels::ListGpus(&why_no_gpu);
  int gpus = static_cast<int>(visible.size());
  if (gpu_limit >= 0 && gpu_limit < gpus) {
    gpus = gpu_limit;
    why_no_gpu = "--device-count gpu=" + std::to_string(gpu_limit) + " hides the rest";
  }
  std::string available = "cpu:0";
  for (int g = 0; g < gpus; ++g) available += ", gpu:" + std::to_string(g);

  std::vector<TowerDevice> towers;
  std::set<std::string> seen;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    const size_t colon = item.find(':');
    const std::string kind = item.substr(0, colon);
    int index = -1;
    if (colon != std::string::npos && colon + 1 < item.size() && item.size() - colon - 1 <= 6 &&
        item.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
      index = std::stoi(item.substr(colon + 1));
    }
    if ((kind != "cpu" && kind != "gpu") || index < 0) {
      return InvalidArgumentError("--towers entry '" + item +
                                  "' is not cpu:N or gpu:N (e.g. --towers cpu:0,cpu:1)");
    }
    TowerDevice d;
    d.kind = kind == "gpu" ? TowerDevice::Kind::kGpu : TowerDevice::Kind::kCpu;
    d.index = index;
    // CPU towers are threads: cpu:N names one more of them on the one CPU device.
    const bool exists = d.kind == TowerDevice::Kind::kCpu || index < gpus;
    if (!exists) {
      const std::string what =
          item + " does not exist (" +
          (gpus == 0 ? "no GPU: " + why_no_gpu : std::to_string(gpus) + " visible GPU(s)") + ")";
      if (!allow_soft_placement) {
        return NotFoundError("--towers " + what + "; available devices: " + available +
                             ". Use one of them (e.g. --towers cpu:0), or "
                             "--allow-soft-placement to fall back to an existing device");
      }
      TowerDevice fallback;
      if (gpus > 0) {
        fallback.kind = TowerDevice::Kind::kGpu;
        fallback.index = index % gpus;
      }
      if (warnings) warnings->push_back(what + "; placed on " + fallback.name() + " instead");
      d = fallback;
    }
    // After soft placement two towers may land on one GPU; a GPU runs one tower per worker.
    if (d.kind == TowerDevice::Kind::kGpu && !seen.insert(d.name()).second) {
      return InvalidArgumentError("--towers puts two towers on " + d.name() +
                                  " (one tower per GPU; use one tower with a larger batch)");
    }
    towers.push_back(d);
  }
  if (towers.empty()) return InvalidArgumentError("--towers is empty; use e.g. cpu:0");
  return towers;
}

Result<std::unique_ptr<kernels::Backend<float>>> CreateTowerBackend(
    const TowerDevice& device, const TowerBackendOptions& options) {
  if (device.kind == TowerDevice::Kind::kCpu) {
    TOWERPS_ASSIGN_OR_RETURN(
        auto cpu, kernels::CpuBackend::Create({.intra_op_threads = options.intra_op_threads}));
    return std::unique_ptr<kernels::Backend<float>>(std::move(cpu));
  }
#ifdef TOWERPS_WITH_CUDA
  kernels::CudaBackendOptions o;
  o.device = device.index;
  o.memory.memory_fraction = options.gpu_memory_fraction;
  o.memory.allow_growth = options.allow_growth;
  TOWERPS_ASSIGN_OR_RETURN(auto gpu, kernels::CudaBackend::Create(o));
  return std::unique_ptr<kernels::Backend<float>>(std::move(gpu));
#else
  return NotFoundError(device.name() +
                       ": TowerPS was built without CUDA (TOWERPS_CUDA=OFF or no nvcc); use "
                       "--towers cpu:0");
#endif
}

}  // namespace towerps::worker
