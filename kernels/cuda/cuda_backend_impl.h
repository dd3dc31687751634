// CudaBackend's state (cuda_backend.h), shared by the files that implement its ops:
// cuda_backend.cc and cuda_backend_interaction.cc. Private to kernels/cuda/.
//
// Contract: as CudaBackend's: one thread at a time; every op calls Enter() first, so that the
// device is current on the calling thread.
#ifndef TOWERPS_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_
#define TOWERPS_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <memory>
#include <string>

#include "kernels/cuda/conv_planner.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/device_space.h"

namespace towerps::kernels {
namespace cuda_impl {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;
// cuDNN tensor dimensions are int; elementwise cuDNN calls go in chunks of at most this many.
constexpr int64_t kMaxCudnnElements = int64_t{1} << 30;
// cuBLAS workspace (NVIDIA recommends 32 MiB on Hopper), from our allocator.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

}  // namespace cuda_impl

// Members are destroyed in reverse order, after ~CudaBackend has synchronised both streams with
// the device current: the convolution plans and the descriptors, the library handles, the
// buffers (back to the allocator), the memory space (pending copy events, the copy stream, the
// allocator's memory), and last the compute stream everything was queued on.
struct CudaBackend::Impl {
  CudaBackendOptions options;
  std::string name;
  cuda::CudaStream stream;  // compute: every op and every copy but CopyToHostAsync
  std::unique_ptr<cuda::DeviceSpace> memory;  // null only when Create failed to reserve it
  cuda::DeviceBuffer cublas_workspace;
  cuda::DeviceBuffer scratch;  // log-probabilities, the recomputed LRN output
  cuda::CublasHandle cublas;
  cuda::CudnnHandle cudnn;
  cuda::TensorDescriptor tensor_a, tensor_b;  // for the non-conv ops
  cuda::ActivationDescriptor relu, tanh, sigmoid;
  cuda::LrnDescriptor lrn;
  std::unique_ptr<cuda::ConvPlanner> conv;

  void Enter() const { TOWERPS_CUDA_CHECK(cudaSetDevice(options.device)); }

  void* Scratch(size_t bytes) {
    TOWERPS_CHECK(scratch.Grow(bytes).ok())
        << name << ": out of device memory for " << bytes << " bytes of scratch (raise "
        << "--gpu-memory-fraction or lower the batch size)";
    return scratch.data();
  }

  void ActivationForward(const cuda::ActivationDescriptor& act, int64_t n, const float* x,
                         float* y) {
    Enter();
    for (int64_t at = 0; at < n; at += cuda_impl::kMaxCudnnElements) {
      const int len = static_cast<int>(std::min(cuda_impl::kMaxCudnnElements, n - at));
      cuda::SetNchwFloat(tensor_a.get(), 1, 1, 1, len);
      TOWERPS_CUDNN_CHECK(cudnnActivationForward(cudnn.get(), act.get(), &cuda_impl::kOne,
                                                 tensor_a.get(), x + at, &cuda_impl::kZero,
                                                 tensor_a.get(), y + at));
    }
  }
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_CUDA_CUDA_BACKEND_IMPL_H_
