// ListGpus() for builds without the CUDA backend: the stand-in of gpu_devices.cc beside it.
#include "kernels/gpu_devices.h"

namespace towerps::kernels {

bool BuiltWithCuda() { return false; }

std::vector<GpuInfo> ListGpus(std::string* why_empty) {
  if (why_empty) *why_empty = "TowerPS was built without CUDA (TOWERPS_CUDA=OFF or no nvcc)";
  return {};
}

}  // namespace towerps::kernels
