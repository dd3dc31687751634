// The GPU entry points (kernels/gpu_devices.h, kernels/gpu_plugin.h) of a build without the CUDA
// backend: no GPU, and a GPU backend is an error that says why.
#include "kernels/gpu_devices.h"
#include "kernels/gpu_plugin.h"

namespace towerps::kernels {

bool BuiltWithCuda() { return false; }

std::vector<GpuInfo> ListGpus(std::string* why_empty) {
  if (why_empty) *why_empty = "TowerPS was built without CUDA (TOWERPS_CUDA=OFF or no nvcc)";
  return {};
}

bool GpuPluginLoaded() { return false; }

Result<std::unique_ptr<Backend<float>>> CreateGpuBackend(const CudaBackendOptions& options) {
  return NotFoundError("gpu:" + std::to_string(options.device) +
                       ": TowerPS was built without CUDA (TOWERPS_CUDA=OFF or no nvcc); use "
                       "--towers cpu:0");
}

}  // namespace towerps::kernels
