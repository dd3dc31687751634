// cuBLAS and cuDNN error checks, the siblings of TOWERPS_CUDA_CHECK (cuda_check.h): a failing
// call aborts with file, line, the expression and the library's own message. A failure of these
// libraries inside TowerPS is a bug (bad descriptor, unsupported configuration) or a dead device.
#ifndef TOWERPS_KERNELS_CUDA_LIBRARY_CHECK_H_
#define TOWERPS_KERNELS_CUDA_LIBRARY_CHECK_H_

#include <cublas_v2.h>
#include <cudnn.h>

#include "towerps/check.h"

#define TOWERPS_CUBLAS_CHECK(expr)                                   \
  do {                                                               \
    cublasStatus_t _towerps_st = (expr);                             \
    TOWERPS_CHECK(_towerps_st == CUBLAS_STATUS_SUCCESS)              \
        << #expr << ": " << cublasGetStatusName(_towerps_st) << ": " \
        << cublasGetStatusString(_towerps_st);                       \
  } while (0)

#define TOWERPS_CUDNN_CHECK(expr)                             \
  do {                                                        \
    cudnnStatus_t _towerps_st = (expr);                       \
    TOWERPS_CHECK(_towerps_st == CUDNN_STATUS_SUCCESS)        \
        << #expr << ": " << cudnnGetErrorString(_towerps_st); \
  } while (0)

#endif  // TOWERPS_KERNELS_CUDA_LIBRARY_CHECK_H_
