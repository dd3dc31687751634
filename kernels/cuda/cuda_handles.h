// Move-only owners of the CUDA, cuBLAS and cuDNN objects the CUDA backend creates: streams,
// events, library handles and cuDNN descriptors. Internal to kernels/cuda.
//
// Contract:
//  - T::Create(args...) creates the object (the arguments are the creation call's flags, if
//    any); a default-constructed owner is empty. The destructor (or reset()) destroys a non-empty
//    object; moving leaves the source empty.
//  - Creation and destruction are checked: a failure is a bug or a dead device and aborts with the
//    library's message (cuda_check.h, library_check.h).
//  - Objects belong to a device: create and destroy them with that device current on the calling
//    thread. An owner is no more thread-safe than the object it holds.
#ifndef TOWERPS_KERNELS_CUDA_CUDA_HANDLES_H_
#define TOWERPS_KERNELS_CUDA_CUDA_HANDLES_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/library_check.h"

namespace towerps::kernels::cuda {

// Owns one object of a pointer-typed handle. Traits gives `Handle`, `Create(Handle*, args...)`
// and `Destroy(Handle)`.
template <typename Traits>
class UniqueHandle {
 public:
  using Handle = typename Traits::Handle;

  template <typename... Args>
  static UniqueHandle Create(Args... args) {
    UniqueHandle owner;
    Traits::Create(&owner.handle_, args...);
    return owner;
  }

  UniqueHandle() = default;
  UniqueHandle(UniqueHandle&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  UniqueHandle& operator=(UniqueHandle&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;
  ~UniqueHandle() { reset(); }

  // Borrowed: valid while this owner holds it.
  Handle get() const { return handle_; }
  void reset() {
    if (handle_ != nullptr) Traits::Destroy(std::exchange(handle_, nullptr));
  }

 private:
  Handle handle_ = nullptr;
};

namespace handle_traits {

struct Stream {
  using Handle = cudaStream_t;
  static void Create(Handle* h, unsigned flags) {
    TOWERPS_CUDA_CHECK(cudaStreamCreateWithFlags(h, flags));
  }
  static void Destroy(Handle h) { TOWERPS_CUDA_CHECK(cudaStreamDestroy(h)); }
};
struct Event {
  using Handle = cudaEvent_t;
  static void Create(Handle* h, unsigned flags) {
    TOWERPS_CUDA_CHECK(cudaEventCreateWithFlags(h, flags));
  }
  static void Destroy(Handle h) { TOWERPS_CUDA_CHECK(cudaEventDestroy(h)); }
};
struct Cublas {
  using Handle = cublasHandle_t;
  static void Create(Handle* h) { TOWERPS_CUBLAS_CHECK(cublasCreate(h)); }
  static void Destroy(Handle h) { TOWERPS_CUBLAS_CHECK(cublasDestroy(h)); }
};
struct Cudnn {
  using Handle = cudnnHandle_t;
  static void Create(Handle* h) { TOWERPS_CUDNN_CHECK(cudnnCreate(h)); }
  static void Destroy(Handle h) { TOWERPS_CUDNN_CHECK(cudnnDestroy(h)); }
};
struct TensorDescriptor {
  using Handle = cudnnTensorDescriptor_t;
  static void Create(Handle* h) { TOWERPS_CUDNN_CHECK(cudnnCreateTensorDescriptor(h)); }
  static void Destroy(Handle h) { TOWERPS_CUDNN_CHECK(cudnnDestroyTensorDescriptor(h)); }
};
struct FilterDescriptor {
  using Handle = cudnnFilterDescriptor_t;
  static void Create(Handle* h) { TOWERPS_CUDNN_CHECK(cudnnCreateFilterDescriptor(h)); }
  static void Destroy(Handle h) { TOWERPS_CUDNN_CHECK(cudnnDestroyFilterDescriptor(h)); }
};
struct ConvolutionDescriptor {
  using Handle = cudnnConvolutionDescriptor_t;
  static void Create(Handle* h) { TOWERPS_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(h)); }
  static void Destroy(Handle h) { TOWERPS_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(h)); }
};
struct ActivationDescriptor {
  using Handle = cudnnActivationDescriptor_t;
  static void Create(Handle* h) { TOWERPS_CUDNN_CHECK(cudnnCreateActivationDescriptor(h)); }
  static void Destroy(Handle h) { TOWERPS_CUDNN_CHECK(cudnnDestroyActivationDescriptor(h)); }
};
struct LrnDescriptor {
  using Handle = cudnnLRNDescriptor_t;
  static void Create(Handle* h) { TOWERPS_CUDNN_CHECK(cudnnCreateLRNDescriptor(h)); }
  static void Destroy(Handle h) { TOWERPS_CUDNN_CHECK(cudnnDestroyLRNDescriptor(h)); }
};

}  // namespace handle_traits

using CudaStream =
    UniqueHandle<handle_traits::Stream>;               // Create(flags of cudaStreamCreateWithFlags)
using CudaEvent = UniqueHandle<handle_traits::Event>;  // Create(flags of cudaEventCreateWithFlags)
using CublasHandle = UniqueHandle<handle_traits::Cublas>;
using CudnnHandle = UniqueHandle<handle_traits::Cudnn>;
using TensorDescriptor = UniqueHandle<handle_traits::TensorDescriptor>;
using FilterDescriptor = UniqueHandle<handle_traits::FilterDescriptor>;
using ConvolutionDescriptor = UniqueHandle<handle_traits::ConvolutionDescriptor>;
using ActivationDescriptor = UniqueHandle<handle_traits::ActivationDescriptor>;
using LrnDescriptor = UniqueHandle<handle_traits::LrnDescriptor>;

// Describes a dense float32 NCHW tensor.
inline void SetNchwFloat(cudnnTensorDescriptor_t d, int n, int c, int h, int w) {
  TOWERPS_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
}

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_CUDA_HANDLES_H_
