// TowerDevices: the devices one worker drives, from --towers ("cpu:0,cpu:1", "gpu:0,gpu:1"), and
// the compute backend of each.
//
// Each tower computes on its slice of the worker's batch with its own copy of the parameters;
// the worker averages the towers' gradients before pushing. CPU towers are threads, each with
// its own CpuBackend. GPU towers (builds with CUDA) each get a CudaBackend on their device: its
// own stream, cuBLAS and cuDNN handles and caching allocator with the worker's memory options.
// Asking for a device that does not exist is an error listing the devices there are (with
// allow_soft_placement, a warning and a fallback to an existing device instead).
//
// Contract: free functions; thread-compatible. ParseTowers queries the CUDA runtime for the
// visible GPUs (CUDA_VISIBLE_DEVICES applies; gpu_limit hides the rest).
#ifndef TOWERPS_WORKER_TOWER_DEVICES_H_
#define TOWERPS_WORKER_TOWER_DEVICES_H_

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cpu/conv_planner.h"
#include "towerps/result.h"

namespace towerps::worker {

struct TowerDevice {
  enum class Kind { kCpu, kGpu } kind = Kind::kCpu;
  int index = 0;
  std::string name() const {
    return (kind == Kind::kCpu ? "cpu:" : "gpu:") + std::to_string(index);
  }
};

// The syntax of --towers alone: comma-separated cpu:N or gpu:N (N in 0..999999), no GPU named
// twice. Checks nothing against the machine (pure; thread-safe), so the launcher can reject a bad
// list before it starts anything. Errors are kInvalidArgument naming --towers and the entry.
Result<std::vector<TowerDevice>> ParseTowerList(const std::string& spec);

// ParseTowerList, then checks the list against what this machine has: cpu:0 and the visible GPUs,
// of which only the first `gpu_limit` count when it is >= 0 (--device-count gpu=N). `warnings`
// receives soft-placement notes: a missing gpu:N falls back to gpu:(N mod visible GPUs) when there
// are GPUs, otherwise to cpu:0 (and cpu:N, N > 0, to cpu:0). Errors are kInvalidArgument (syntax,
// duplicates) or kNotFound (missing device, naming the available ones and the fixes).
Result<std::vector<TowerDevice>> ParseTowers(const std::string& spec, bool allow_soft_placement,
                                             std::vector<std::string>* warnings,
                                             int gpu_limit = -1);

struct TowerBackendOptions {
  int intra_op_threads = 1;                                                   // CPU towers
  kernels::cpu::ConvAlgorithm cpu_conv = kernels::cpu::ConvAlgorithm::kAuto;  // CPU towers
  double gpu_memory_fraction = 0.0;  // GPU towers: see WorkerOptions
  bool allow_growth = false;
  bool gpu_filter_gradient_gemm = true;  // GPU towers: CudaBackendOptions::filter_gradient_gemm
};

// The backend of one tower. kResourceExhausted when a GPU's memory share cannot be reserved
// (the message names the fraction, the request and the free memory); kNotFound for a GPU in a
// build without CUDA.
Result<std::unique_ptr<kernels::Backend<float>>> CreateTowerBackend(
    const TowerDevice& device, const TowerBackendOptions& options);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TOWER_DEVICES_H_
