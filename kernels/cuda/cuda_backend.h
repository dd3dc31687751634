// CudaBackend: Backend<float> (kernels/backend.h) on one NVIDIA GPU.
//
// How: matrix products are cuBLAS sgemm (row-major through the operand swap, C^T = B^T A^T);
// convolutions are cuDNN, with the algorithms chosen once per shape (cudnnGet*Algorithm_v7,
// first acceptable by expected speed) and cached, and their workspace taken from our allocator
// (kernels/cuda/conv_planner.h);
// activations forward, LRN (when LrnParams map onto cuDNN's formula) and log-softmax are cuDNN;
// pooling, batch norm, bias, dropout, the loss, activation gradients, LRN otherwise and the
// elementwise helpers are our kernels (kernels/cuda/*.cu). Every op is queued on the backend's one
// compute stream; every CUDA, cuBLAS and cuDNN call is checked and every launch is followed by
// cudaGetLastError().
//
// Numerics: strict float32 by default (cuBLAS default math, cuDNN FMA math, no FFT or Winograd
// convolutions), so results match the CPU within float32 tolerances; allow_tf32 lets both use TF32
// tensor cores (faster, about 1e-3 relative error, PyTorch's default for convolutions).
//
// Memory: every byte of device memory the backend uses, its callers' buffers included (the
// MemorySpace API), comes from its CachingAllocator (kernels/cuda/caching_allocator.h), which
// reserves options.memory at creation (or grows under it). host_memory() is false; the copies
// are cudaMemcpyAsync on the compute stream, and CopyFromHost/CopyToHost wait for it
// (kernels/cuda/device_space.h).
//
// Contract:
//  - Pointers passed to ops are device memory on this backend's device, borrowed; `AverageOf`'s
//    pointer array is a host array of device pointers.
//  - Ops return once queued; results are ready after CopyToHost or Synchronize.
//  - Not thread-safe: one caller at a time. Any thread may be that caller: every call makes the
//    device current on the calling thread first.
//  - A CUDA, cuBLAS or cuDNN failure inside an op is a bug or a dead device and aborts with the
//    library's message; expected failures (no such device, out of memory) are Status results of
//    Create and Allocate.
#ifndef TOWERPS_KERNELS_CUDA_CUDA_BACKEND_H_
#define TOWERPS_KERNELS_CUDA_CUDA_BACKEND_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "kernels/backend.h"
#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_backend_options.h"
#include "towerps/result.h"

namespace towerps::kernels {

class CudaBackend final : public Backend<float> {
 public:
  // kNotFound (naming the visible devices) for a device that does not exist, kResourceExhausted
  // when the memory share cannot be reserved, kInvalidArgument for bad options.
  static Result<std::unique_ptr<CudaBackend>> Create(const CudaBackendOptions& options);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override;  // "gpu:N"
  int device() const;
  // The allocator's counters (device_memory_stats() is the MemorySpace subset).
  cuda::AllocatorStats memory_stats() const;

  // ---- MemorySpace ----
  bool host_memory() const override { return false; }
  Result<void*> Allocate(size_t bytes) override;
  void Free(void* p) override;
  void CopyFromHost(const void* host, size_t bytes, void* dst) override;
  void CopyToHost(const void* src, size_t bytes, void* host) override;
  void Copy(const void* src, size_t bytes, void* dst) override;
  void Synchronize() override;
  // On the compute stream, without waiting.
  void CopyFromHostAsync(const void* host, size_t bytes, void* dst) override;
  // On a second (copy) stream, ordered after the compute stream's queued work by an event.
  uint64_t CopyToHostAsync(const void* src, size_t bytes, void* host) override;
  void WaitCopy(uint64_t ticket) override;
  void PinHostMemory(void* host, size_t bytes) override;  // cudaHostRegister
  void UnpinHostMemory(void* host) override;
  // True when `peer` is a CudaBackend (this one included).
  bool CanCopyFromPeer(const MemorySpace& peer) const override;
  // Copies `bytes` from `src` on `peer`'s device into `dst` on this one, after the work queued
  // on both backends so far; later work on this backend sees the data. `peer` must be a
  // CudaBackend (otherwise it aborts) and is borrowed. The one call that may run while another
  // thread uses `peer`: it only records an event on `peer`'s compute stream (the CUDA runtime is
  // thread-safe), which covers the work queued on `peer` before the call; the caller orders that
  // (e.g. the other thread says it has queued it). The first copy from a device enables peer
  // access to it where the system allows (direct NVLink/P2P copies); otherwise the copy is
  // staged through host memory by CUDA.
  void CopyFromPeer(MemorySpace& peer, const void* src, size_t bytes, void* dst) override;
  // The caching allocator's peak in use, reservation and limit.
  std::optional<DeviceMemoryStats> device_memory_stats() const override;

  // ---- Backend<float> ----
  void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
            const float* b, float beta, float* c) override;
  void BiasAdd(int outer, int channels, int inner, const float* bias, float* y) override;
  void BiasBackward(int outer, int channels, int inner, const float* dy, float* db) override;
  std::string Conv2dPlan(const Conv2dShape& s) override;
  void Conv2dForward(const Conv2dShape& s, const float* x, const float* w, float* y) override;
  void Conv2dBackwardData(const Conv2dShape& s, const float* dy, const float* w,
                          float* dx) override;
  void Conv2dBackwardFilter(const Conv2dShape& s, const float* x, const float* dy,
                            float* dw) override;
  void MaxPoolForward(const Pool2dShape& s, const float* x, float* y) override;
  void MaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy, float* dx) override;
  void AvgPoolForward(const Pool2dShape& s, const float* x, float* y) override;
  void AvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx) override;
  void ReluForward(int64_t n, const float* x, float* y) override;
  void ReluBackward(int64_t n, const float* y, const float* dy, float* dx) override;
  void TanhForward(int64_t n, const float* x, float* y) override;
  void TanhBackward(int64_t n, const float* y, const float* dy, float* dx) override;
  void SigmoidForward(int64_t n, const float* x, float* y) override;
  void SigmoidBackward(int64_t n, const float* y, const float* dy, float* dx) override;
  void LrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y) override;
  void LrnBackward(int n, int c, int hw, const LrnParams& p, const float* x, const float* dy,
                   float* dx) override;
  void BatchNormForwardTraining(int n, int c, int hw, float epsilon, const float* x,
                                const float* gamma, const float* beta, float* y, float* mean,
                                float* var, float* inv_std) override;
  void BatchNormForwardInference(int n, int c, int hw, float epsilon, const float* x,
                                 const float* gamma, const float* beta, const float* mean,
                                 const float* var, float* y) override;
  void BatchNormBackward(int n, int c, int hw, const float* x, const float* dy, const float* gamma,
                         const float* mean, const float* inv_std, float* dx, float* dgamma,
                         float* dbeta) override;
  void GlobalAvgPoolForward(int n, int c, int hw, const float* x, float* y) override;
  void GlobalAvgPoolBackward(int n, int c, int hw, const float* dy, float* dx) override;

  void DropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                      float* y) override;
  void DropoutBackward(int64_t n, const float* mask, const float* dy, float* dx) override;
  void SoftmaxCrossEntropy(int batch, int classes, const float* logits, const int32_t* labels,
                           float grad_scale, float* loss, float* dlogits) override;
  void SquaredError(int batch, int width, const float* outputs, const float* targets,
                    float grad_scale, float* loss, float* doutputs) override;
  void SigmoidCrossEntropy(int batch, const float* logits, const int32_t* labels, float grad_scale,
                           float* loss, float* dlogits) override;
  void CopyColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                   int64_t y_stride) override;
  void AddColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                  int64_t y_stride) override;
  void EmbeddingForward(int batch, int fields, int dim, const float* rows, const uint32_t* index,
                        float* y, int64_t y_stride) override;
  void EmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                         const uint32_t* positions, const float* dy, int64_t dy_stride,
                         float* drows) override;
  void EmbeddingBagForward(int batch, int dim, const float* rows, const uint32_t* index,
                           const uint32_t* bags, bool mean, float* y, int64_t y_stride) override;
  void EmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                            const uint32_t* examples, const uint32_t* bags, bool mean,
                            const float* dy, int64_t dy_stride, float* drows) override;
  void DotInteractionForward(int batch, int k, int d, const float* x, float* y) override;
  void DotInteractionBackward(int batch, int k, int d, const float* x, const float* dy,
                              float* dx) override;
  void Add(int64_t n, const float* a, const float* b, float* y) override;
  void Axpy(int64_t n, float alpha, const float* x, float* y) override;
  void Scale(int64_t n, float alpha, float* y) override;
  void Fill(int64_t n, float value, float* y) override;
  void AverageOf(int k, const float* const* in, int64_t n, float* out) override;
  void MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay, const float* g,
                      float* v, float* p) override;

 private:
  struct Impl;
  explicit CudaBackend(std::unique_ptr<Impl> impl);
  // Device scratch for batch norm's partial sums (kernels/cuda/batch_norm.cuh).
  double* BatchNormPartials(int n, int c, int hw);
  std::unique_ptr<Impl> impl_;
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_CUDA_CUDA_BACKEND_H_
