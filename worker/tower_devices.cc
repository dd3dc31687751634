#include "worker/tower_devices.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "common/parse.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/gpu_devices.h"
#include "kernels/gpu_plugin.h"

namespace towerps::worker {
namespace {

constexpr int kMaxTowerIndex = 999999;

// Refuses a GPU named twice (one tower per GPU).
Status CheckGpuOnce(const TowerDevice& d, std::set<std::string>* seen) {
  if (d.kind == TowerDevice::Kind::kGpu && !seen->insert(d.name()).second) {
    return InvalidArgumentError("--towers puts two towers on " + d.name() +
                                " (one tower per GPU; use one tower with a larger batch)");
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<TowerDevice>> ParseTowerList(const std::string& spec) {
  std::vector<TowerDevice> towers;
  std::set<std::string> seen;
  std::stringstream ss(spec);
  for (std::string item; std::getline(ss, item, ',');) {
    const size_t colon = item.find(':');
    const std::string kind = item.substr(0, colon);
    const std::string_view digits =
        colon == std::string::npos ? std::string_view() : std::string_view(item).substr(colon + 1);
    const Result<int> index = ParseInt(digits, "--towers", 0, kMaxTowerIndex);
    if ((kind != "cpu" && kind != "gpu") || !index.ok()) {
      return InvalidArgumentError("--towers entry '" + item +
                                  "' is not cpu:N or gpu:N (e.g. --towers cpu:0,cpu:1)");
    }
    TowerDevice d;
    d.kind = kind == "gpu" ? TowerDevice::Kind::kGpu : TowerDevice::Kind::kCpu;
    d.index = *index;
    TOWERPS_RETURN_IF_ERROR(CheckGpuOnce(d, &seen));
    towers.push_back(d);
  }
  if (towers.empty()) return InvalidArgumentError("--towers is empty; use e.g. cpu:0");
  return towers;
}

Result<std::vector<TowerDevice>> ParseTowers(const std::string& spec, bool allow_soft_placement,
                                             std::vector<std::string>* warnings, int gpu_limit) {
  TOWERPS_ASSIGN_OR_RETURN(std::vector<TowerDevice> listed, ParseTowerList(spec));
  // Only a GPU tower asks for the GPUs: listing them loads the CUDA plugin (kernels/gpu_plugin.h),
  // which a CPU-only worker does without.
  const bool wants_gpu = std::any_of(listed.begin(), listed.end(), [](const TowerDevice& d) {
    return d.kind == TowerDevice::Kind::kGpu;
  });
  std::string why_no_gpu;
  const std::vector<kernels::GpuInfo> visible =
      wants_gpu ? kernels::ListGpus(&why_no_gpu) : std::vector<kernels::GpuInfo>{};
  int gpus = static_cast<int>(visible.size());
  if (gpu_limit >= 0 && gpu_limit < gpus) {
    gpus = gpu_limit;
    why_no_gpu = "--device-count gpu=" + std::to_string(gpu_limit) + " hides the rest";
  }
  std::string available = "cpu:0";
  for (int g = 0; g < gpus; ++g) available += ", gpu:" + std::to_string(g);

  std::vector<TowerDevice> towers;
  std::set<std::string> seen;
  for (TowerDevice d : listed) {
    // CPU towers are threads: cpu:N names one more of them on the one CPU device.
    const bool exists = d.kind == TowerDevice::Kind::kCpu || d.index < gpus;
    if (!exists) {
      const std::string what =
          d.name() + " does not exist (" +
          (gpus == 0 ? "no GPU: " + why_no_gpu : std::to_string(gpus) + " visible GPU(s)") + ")";
      if (!allow_soft_placement) {
        return NotFoundError("--towers " + what + "; available devices: " + available +
                             ". Use one of them (e.g. --towers cpu:0), or "
                             "--allow-soft-placement to fall back to an existing device");
      }
      TowerDevice fallback;
      if (gpus > 0) {
        fallback.kind = TowerDevice::Kind::kGpu;
        fallback.index = d.index % gpus;
      }
      if (warnings) warnings->push_back(what + "; placed on " + fallback.name() + " instead");
      d = fallback;
    }
    // After soft placement two towers may land on one GPU.
    TOWERPS_RETURN_IF_ERROR(CheckGpuOnce(d, &seen));
    towers.push_back(d);
  }
  return towers;
}

Result<std::unique_ptr<kernels::Backend<float>>> CreateTowerBackend(
    const TowerDevice& device, const TowerBackendOptions& options) {
  if (device.kind == TowerDevice::Kind::kCpu) {
    TOWERPS_ASSIGN_OR_RETURN(
        auto cpu, kernels::CpuBackend::Create({.intra_op_threads = options.intra_op_threads,
                                               .conv_algorithm = options.cpu_conv}));
    return std::unique_ptr<kernels::Backend<float>>(std::move(cpu));
  }
  kernels::CudaBackendOptions o;
  o.device = device.index;
  o.memory.memory_fraction = options.gpu_memory_fraction;
  o.memory.allow_growth = options.allow_growth;
  o.filter_gradient_gemm = options.gpu_filter_gradient_gemm;
  return kernels::CreateGpuBackend(o);  // loads the CUDA plugin on first use
}

}  // namespace towerps::worker
