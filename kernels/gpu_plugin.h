// The GPU backend as a plugin. The CUDA code (kernels/cuda/) and the libraries it needs
// (the CUDA runtime, cuBLAS, cuBLASLt, cuDNN) are one shared library, libtowerps_cuda.so, which a
// process loads the first time it asks for a GPU: ListGpus() (kernels/gpu_devices.h) or
// CreateGpuBackend(). A CPU-only process never maps them: cuBLASLt alone dirties about 84 MB of
// its own data as it loads, which every idle CPU worker used to carry (docs/PERFORMANCE.md).
//
// Where it is looked for, in order: the executable's ../lib/ (the build tree's and an install's
// layout, and scripts/package.sh's bundle), the executable's own directory, the install prefix's
// lib directory, then the dynamic linker's path (LD_LIBRARY_PATH). The first file found is
// loaded; one that fails to load (a CUDA library missing, another build's plugin) is an error
// naming it and why, not a silent fall-through to the next.
//
// Contract: thread-safe. Loading happens once per process (a loaded library is process-wide
// state by nature) and its outcome is kept: a failed load is reported by every later call. The
// plugin and the code that loads it come from the same build; kGpuPluginAbi and the size of
// CudaBackendOptions guard against a stale one. The plugin logs through its own copy of
// common/logging, initialised with this process's settings (CurrentLogOptions) when it loads.
#ifndef TOWERPS_KERNELS_GPU_PLUGIN_H_
#define TOWERPS_KERNELS_GPU_PLUGIN_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend_options.h"
#include "kernels/gpu_devices.h"
#include "towerps/result.h"

namespace towerps::kernels {

// Bump whenever GpuPluginApi or CudaBackendOptions changes.
inline constexpr int kGpuPluginAbi = 2;
inline constexpr char kGpuPluginFile[] = "libtowerps_cuda.so";
// The plugin's one exported symbol: extern "C" const GpuPluginApi* towerps_gpu_plugin().
inline constexpr char kGpuPluginEntry[] = "towerps_gpu_plugin";

struct GpuPluginApi {
  int abi = 0;              // kGpuPluginAbi of the plugin's build
  size_t options_size = 0;  // sizeof(CudaBackendOptions) there
  void (*init_logging)(const LogOptions& options) = nullptr;
  std::vector<GpuInfo> (*list_gpus)(std::string* why_empty) = nullptr;
  Result<std::unique_ptr<Backend<float>>> (*create_backend)(const CudaBackendOptions& options) =
      nullptr;
};

// A backend on GPU options.device: CudaBackend::Create's errors (kNotFound for a device that
// does not exist, kResourceExhausted, kInvalidArgument), or kNotFound when the plugin cannot be
// loaded (naming where it was looked for and why) or TowerPS was built without CUDA.
Result<std::unique_ptr<Backend<float>>> CreateGpuBackend(const CudaBackendOptions& options);

// Whether this process has loaded the plugin (for tests: a CPU-only job must not).
bool GpuPluginLoaded();

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_GPU_PLUGIN_H_
