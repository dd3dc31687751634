// CUDA error checks. CUDA_CHECK aborts with file, line and CUDA's own message: a failing CUDA
// call inside TowerPS is a bug or a dead device. Code that can meet a user error (no device,
// out of memory under a configured fraction) calls CudaStatus() and returns a Status instead.
// Call TOWERPS_CUDA_CHECK_LAUNCH() right after every kernel launch.
#ifndef TOWERPS_KERNELS_CUDA_CUDA_CHECK_H_
#define TOWERPS_KERNELS_CUDA_CUDA_CHECK_H_

#include <cuda_runtime.h>

#include <string>

#include "towerps/check.h"
#include "towerps/status.h"

#define TOWERPS_CUDA_CHECK(expr)                                                                  \
  do {                                                                                            \
    cudaError_t _towerps_err = (expr);                                                            \
    TOWERPS_CHECK(_towerps_err == cudaSuccess) << #expr << ": " << cudaGetErrorName(_towerps_err) \
                                               << ": " << cudaGetErrorString(_towerps_err);       \
  } while (0)

#define TOWERPS_CUDA_CHECK_LAUNCH() TOWERPS_CUDA_CHECK(cudaGetLastError())

namespace towerps::kernels::cuda {

// Converts a CUDA error into a Status whose message names `what` and CUDA's explanation.
inline Status CudaStatus(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return Status::Ok();
  const std::string text =
      what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorMemoryAllocation) return ResourceExhaustedError(text);
  if (err == cudaErrorNoDevice || err == cudaErrorInsufficientDriver) return NotFoundError(text);
  return InternalError(text);
}

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_CUDA_CHECK_H_
