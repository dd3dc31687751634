// libtowerps_cuda.so's entry point (kernels/gpu_plugin.h): the table through which a process
// that loaded the plugin lists GPUs and makes backends. Every other symbol of the plugin, the
// copies of the TowerPS code it links among them, is hidden.
#include "common/logging.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/gpu_devices.h"
#include "kernels/gpu_plugin.h"

namespace {

using towerps::Result;
using towerps::kernels::Backend;
using towerps::kernels::CudaBackend;
using towerps::kernels::CudaBackendOptions;

Result<std::unique_ptr<Backend<float>>> CreateBackend(const CudaBackendOptions& options) {
  TOWERPS_ASSIGN_OR_RETURN(std::unique_ptr<CudaBackend> backend, CudaBackend::Create(options));
  return std::unique_ptr<Backend<float>>(std::move(backend));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const towerps::kernels::GpuPluginApi*
towerps_gpu_plugin() {
  static const towerps::kernels::GpuPluginApi api{
      .abi = towerps::kernels::kGpuPluginAbi,
      .options_size = sizeof(CudaBackendOptions),
      .init_logging = [](const towerps::LogOptions& o) { towerps::InitLogging(o); },
      .list_gpus = towerps::kernels::cuda::ListCudaGpus,
      .create_backend = CreateBackend,
  };
  return &api;
}
