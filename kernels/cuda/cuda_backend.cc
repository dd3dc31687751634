#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_backend_impl.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/batch_norm.cuh"
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/conv_filter_gemm.cuh"
#include "kernels/cuda/conv_planner.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/device_space.h"
#include "kernels/cuda/dropout.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/gpu_devices.h"
#include "kernels/cuda/library_check.h"
#include "kernels/cuda/lrn.cuh"
#include "kernels/cuda/pooling.cuh"
#include "kernels/cuda/softmax_cross_entropy.cuh"

namespace towerps::kernels {

using cuda_impl::kCublasWorkspaceBytes;
using cuda_impl::kOne;
using cuda_impl::kZero;

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions& options) {
  TOWERPS_RETURN_IF_ERROR(options.memory.Validate());
  std::string why;
  const std::vector<GpuInfo> gpus = cuda::ListCudaGpus(&why);
  if (options.device < 0 || options.device >= static_cast<int>(gpus.size())) {
    std::string available = "cpu:0";
    for (const GpuInfo& g : gpus) available += ", gpu:" + std::to_string(g.index);
    return NotFoundError("gpu:" + std::to_string(options.device) + " does not exist (" +
                         (gpus.empty() ? why : std::to_string(gpus.size()) + " visible GPUs") +
                         "); available devices: " + available);
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->name = "gpu:" + std::to_string(options.device);
  TOWERPS_RETURN_IF_ERROR(
      cuda::CudaStatus(cudaSetDevice(options.device), "cudaSetDevice(" + impl->name + ")"));
  // Handles first: they take device memory of their own, which the reservation below must not
  // leave them short of.
  impl->stream = cuda::CudaStream::Create(cudaStreamNonBlocking);
  cuda::CudaStream copy_stream = cuda::CudaStream::Create(cudaStreamNonBlocking);
  impl->cublas = cuda::CublasHandle::Create();
  const cublasHandle_t cublas = impl->cublas.get();
  TOWERPS_CUBLAS_CHECK(cublasSetStream(cublas, impl->stream.get()));
  TOWERPS_CUBLAS_CHECK(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST));
  TOWERPS_CUBLAS_CHECK(cublasSetMathMode(
      cublas, options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  impl->cudnn = cuda::CudnnHandle::Create();
  TOWERPS_CUDNN_CHECK(cudnnSetStream(impl->cudnn.get(), impl->stream.get()));
  // Then the memory share: a worker that does not fit fails here, cleanly (the destructor
  // releases what exists so far).
  std::unique_ptr<CudaBackend> backend(new CudaBackend(std::move(impl)));
  Impl& s = *backend->impl_;
  std::unique_ptr<cuda::CachingAllocator> allocator;
  TOWERPS_ASSIGN_OR_RETURN(allocator, cuda::CreateDeviceAllocator(options.device, options.memory));
  s.memory = std::make_unique<cuda::DeviceSpace>(options.device, s.stream.get(),
                                                 std::move(copy_stream), std::move(allocator));
  s.cublas_workspace = cuda::DeviceBuffer(&s.memory->allocator());
  TOWERPS_RETURN_IF_ERROR(s.cublas_workspace.Grow(kCublasWorkspaceBytes));
  TOWERPS_CUBLAS_CHECK(
      cublasSetWorkspace(cublas, s.cublas_workspace.data(), kCublasWorkspaceBytes));
  s.scratch = cuda::DeviceBuffer(&s.memory->allocator());
  s.tensor_a = cuda::TensorDescriptor::Create();
  s.tensor_b = cuda::TensorDescriptor::Create();
  const std::pair<cuda::ActivationDescriptor*, cudnnActivationMode_t> acts[] = {
      {&s.relu, CUDNN_ACTIVATION_RELU},
      {&s.tanh, CUDNN_ACTIVATION_TANH},
      {&s.sigmoid, CUDNN_ACTIVATION_SIGMOID}};
  for (const auto& [desc, mode] : acts) {
    *desc = cuda::ActivationDescriptor::Create();
    TOWERPS_CUDNN_CHECK(
        cudnnSetActivationDescriptor(desc->get(), mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  s.lrn = cuda::LrnDescriptor::Create();
  s.conv = std::make_unique<cuda::ConvPlanner>(
      s.cudnn.get(), &s.memory->allocator(),
      cuda::ConvPlannerOptions{.allow_tf32 = options.allow_tf32,
                               .allow_transform_algorithms = options.allow_transform_algorithms,
                               .filter_gradient_gemm = options.filter_gradient_gemm,
                               .workspace_limit_bytes = options.conv_workspace_limit_bytes,
                               .device_name = s.name});
  return backend;
}

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudaBackend::~CudaBackend() {
  // Wait for everything queued; Impl's members then go with the device still current.
  impl_->Enter();
  if (impl_->memory) {
    impl_->memory->Synchronize();
  } else {
    TOWERPS_CUDA_CHECK(cudaStreamSynchronize(impl_->stream.get()));
  }
}

std::string CudaBackend::name() const { return impl_->name; }
int CudaBackend::device() const { return impl_->options.device; }
cuda::AllocatorStats CudaBackend::memory_stats() const {
  return impl_->memory->allocator().stats();
}

// ---- MemorySpace (kernels/cuda/device_space.h) ----

Result<void*> CudaBackend::Allocate(size_t bytes) { return impl_->memory->Allocate(bytes); }
void CudaBackend::Free(void* p) { impl_->memory->Free(p); }
void CudaBackend::CopyFromHost(const void* host, size_t bytes, void* dst) {
  impl_->memory->CopyFromHost(host, bytes, dst);
}
void CudaBackend::CopyFromHostAsync(const void* host, size_t bytes, void* dst) {
  impl_->memory->CopyFromHostAsync(host, bytes, dst);
}
void CudaBackend::CopyToHost(const void* src, size_t bytes, void* host) {
  impl_->memory->CopyToHost(src, bytes, host);
}
void CudaBackend::Copy(const void* src, size_t bytes, void* dst) {
  impl_->memory->Copy(src, bytes, dst);
}
void CudaBackend::Synchronize() { impl_->memory->Synchronize(); }
uint64_t CudaBackend::CopyToHostAsync(const void* src, size_t bytes, void* host) {
  return impl_->memory->CopyToHostAsync(src, bytes, host);
}
void CudaBackend::WaitCopy(uint64_t ticket) { impl_->memory->WaitCopy(ticket); }
void CudaBackend::PinHostMemory(void* host, size_t bytes) {
  impl_->memory->PinHostMemory(host, bytes);
}
void CudaBackend::UnpinHostMemory(void* host) { impl_->memory->UnpinHostMemory(host); }

bool CudaBackend::CanCopyFromPeer(const MemorySpace& peer) const {
  return dynamic_cast<const CudaBackend*>(&peer) != nullptr;
}

void CudaBackend::CopyFromPeer(MemorySpace& peer, const void* src, size_t bytes, void* dst) {
  auto* from = dynamic_cast<CudaBackend*>(&peer);
  TOWERPS_CHECK(from != nullptr) << name()
                                 << ": CopyFromPeer from a space that is not a CudaBackend";
  impl_->memory->CopyFromPeer(*from->impl_->memory, src, bytes, dst);
}

std::optional<MemorySpace::DeviceMemoryStats> CudaBackend::device_memory_stats() const {
  const cuda::AllocatorStats a = impl_->memory->allocator().stats();
  return DeviceMemoryStats{.peak_bytes_in_use = a.peak_bytes_in_use,
                           .bytes_reserved = a.bytes_reserved,
                           .limit_bytes = a.limit_bytes};
}

// ---- Dense algebra ----

void CudaBackend::Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                       const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  impl_->Enter();
  // Row-major C[m, n] is column-major C^T[n, m] = op(B)^T op(A)^T: swap the operands. B as
  // stored row-major is column-major with leading dimension = its row length: n (or k when
  // trans_b); the same for A: k (or m when trans_a).
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = trans_b ? k : n;
  const int lda = trans_a ? m : k;
  TOWERPS_CUBLAS_CHECK(cublasSgemm(impl_->cublas.get(), op_b, op_a, n, m, k, &alpha, b,
                                   std::max(ldb, 1), a, std::max(lda, 1), &beta, c, n));
}

void CudaBackend::BiasAdd(int outer, int channels, int inner, const float* bias, float* y) {
  impl_->Enter();
  cuda::LaunchBiasAdd(outer, channels, inner, bias, y, impl_->stream.get());
}

void CudaBackend::BiasBackward(int outer, int channels, int inner, const float* dy, float* db) {
  impl_->Enter();
  cuda::LaunchBiasBackward(outer, channels, inner, dy, db, impl_->stream.get());
}

// ---- Convolution ----

std::string CudaBackend::Conv2dPlan(const Conv2dShape& s) {
  impl_->Enter();
  return impl_->conv->Describe(s);
}

void CudaBackend::Conv2dForward(const Conv2dShape& s, const float* x, const float* w, float* y) {
  impl_->Enter();
  const cuda::ConvPlan& p = impl_->conv->Plan(s);
  TOWERPS_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.fwd_math));
  TOWERPS_CUDNN_CHECK(cudnnConvolutionForward(impl_->cudnn.get(), &kOne, p.x.get(), x, p.w.get(), w,
                                              p.conv.get(), p.fwd, impl_->conv->workspace(),
                                              p.fwd_bytes, &kZero, p.y.get(), y));
}

void CudaBackend::Conv2dBackwardData(const Conv2dShape& s, const float* dy, const float* w,
                                     float* dx) {
  impl_->Enter();
  const cuda::ConvPlan& p = impl_->conv->Plan(s);
  TOWERPS_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.bwd_data_math));
  TOWERPS_CUDNN_CHECK(cudnnConvolutionBackwardData(
      impl_->cudnn.get(), &kOne, p.w.get(), w, p.y.get(), dy, p.conv.get(), p.bwd_data,
      impl_->conv->workspace(), p.bwd_data_bytes, &kZero, p.x.get(), dx));
}

void CudaBackend::Conv2dBackwardFilter(const Conv2dShape& s, const float* x, const float* dy,
                                       float* dw) {
  impl_->Enter();
  const cuda::ConvPlan& p = impl_->conv->Plan(s);
  if (p.filter_gemm_images > 0) {
    cuda::FilterGradientAsGemm(s, x, dy, dw, static_cast<float*>(impl_->conv->workspace()),
                               p.filter_gemm_images, impl_->cublas.get(), impl_->stream.get());
    return;
  }
  TOWERPS_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), p.bwd_filter_math));
  TOWERPS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      impl_->cudnn.get(), &kOne, p.x.get(), x, p.y.get(), dy, p.conv.get(), p.bwd_filter,
      impl_->conv->workspace(), p.bwd_filter_bytes, &kZero, p.w.get(), dw));
}

// ---- Pooling ----

void CudaBackend::MaxPoolForward(const Pool2dShape& s, const float* x, float* y) {
  impl_->Enter();
  cuda::LaunchMaxPoolForward(s, x, y, impl_->stream.get());
}
void CudaBackend::MaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy,
                                  float* dx) {
  impl_->Enter();
  cuda::LaunchMaxPoolBackward(s, x, dy, dx, impl_->stream.get());
}
void CudaBackend::AvgPoolForward(const Pool2dShape& s, const float* x, float* y) {
  impl_->Enter();
  cuda::LaunchAvgPoolForward(s, x, y, impl_->stream.get());
}
void CudaBackend::AvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchAvgPoolBackward(s, dy, dx, impl_->stream.get());
}

// ---- Activations ----

void CudaBackend::ReluForward(int64_t n, const float* x, float* y) {
  impl_->ActivationForward(impl_->relu, n, x, y);
}
void CudaBackend::TanhForward(int64_t n, const float* x, float* y) {
  impl_->ActivationForward(impl_->tanh, n, x, y);
}
void CudaBackend::SigmoidForward(int64_t n, const float* x, float* y) {
  impl_->ActivationForward(impl_->sigmoid, n, x, y);
}
void CudaBackend::ReluBackward(int64_t n, const float* y, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchActivationBackward(cuda::ActivationGradient::kRelu, n, y, dy, dx,
                                 impl_->stream.get());
}
void CudaBackend::TanhBackward(int64_t n, const float* y, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchActivationBackward(cuda::ActivationGradient::kTanh, n, y, dy, dx,
                                 impl_->stream.get());
}
void CudaBackend::SigmoidBackward(int64_t n, const float* y, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchActivationBackward(cuda::ActivationGradient::kSigmoid, n, y, dy, dx,
                                 impl_->stream.get());
}

// ---- LRN ----
// cuDNN computes y = x / (k + (lrnAlpha / lrnN) * sum over [d - floor((N-1)/2), d + N - 1 -
// floor((N-1)/2)] of x^2)^beta. LrnParams' window is [d - r, d + r], so N = 2r + 1 (odd: the
// window is symmetric), k = bias, lrnAlpha = alpha * N, beta = beta; cuDNN accepts
// 1 <= N <= 16, k >= 1e-5 and beta >= 0.01. Other parameters take our kernels.
namespace {

bool LrnMapsOntoCudnn(const LrnParams& p) {
  const int window = 2 * p.depth_radius + 1;
  return window >= CUDNN_LRN_MIN_N && window <= CUDNN_LRN_MAX_N && p.bias >= CUDNN_LRN_MIN_K &&
         p.beta >= CUDNN_LRN_MIN_BETA;
}

}  // namespace

void CudaBackend::LrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y) {
  Impl& s = *impl_;
  s.Enter();
  if (!LrnMapsOntoCudnn(p)) return cuda::LaunchLrnForward(n, c, hw, p, x, y, s.stream.get());
  const unsigned window = static_cast<unsigned>(2 * p.depth_radius + 1);
  TOWERPS_CUDNN_CHECK(cudnnSetLRNDescriptor(s.lrn.get(), window, double{p.alpha} * window,
                                            double{p.beta}, double{p.bias}));
  const cudnnTensorDescriptor_t t = s.tensor_a.get();
  cuda::SetNchwFloat(t, n, c, hw, 1);
  TOWERPS_CUDNN_CHECK(cudnnLRNCrossChannelForward(
      s.cudnn.get(), s.lrn.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, t, x, &kZero, t, y));
}

void CudaBackend::LrnBackward(int n, int c, int hw, const LrnParams& p, const float* x,
                              const float* dy, float* dx) {
  Impl& s = *impl_;
  s.Enter();
  if (!LrnMapsOntoCudnn(p)) return cuda::LaunchLrnBackward(n, c, hw, p, x, dy, dx, s.stream.get());
  // cuDNN's backward wants the forward output too; the interface passes only x, so recompute it.
  float* y = static_cast<float*>(s.Scratch(sizeof(float) * static_cast<size_t>(n) * c * hw));
  LrnForward(n, c, hw, p, x, y);
  const cudnnTensorDescriptor_t t = s.tensor_a.get();  // as LrnForward set it
  TOWERPS_CUDNN_CHECK(cudnnLRNCrossChannelBackward(s.cudnn.get(), s.lrn.get(),
                                                   CUDNN_LRN_CROSS_CHANNEL_DIM1, &kOne, t, y, t, dy,
                                                   t, x, &kZero, t, dx));
}

// ---- Dropout, loss ----

void CudaBackend::DropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                                 float* y) {
  impl_->Enter();
  cuda::LaunchDropoutForward(n, rate, seed, x, mask, y, impl_->stream.get());
}

void CudaBackend::DropoutBackward(int64_t n, const float* mask, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchDropoutBackward(n, mask, dy, dx, impl_->stream.get());
}

void CudaBackend::SoftmaxCrossEntropy(int batch, int classes, const float* logits,
                                      const int32_t* labels, float grad_scale, float* loss,
                                      float* dlogits) {
  Impl& s = *impl_;
  s.Enter();
  if (batch == 0) return;
  // Log-probabilities into scratch (so dlogits may alias logits), then loss and gradient.
  float* log_probs =
      static_cast<float*>(s.Scratch(sizeof(float) * static_cast<size_t>(batch) * classes));
  const cudnnTensorDescriptor_t t = s.tensor_b.get();
  cuda::SetNchwFloat(t, batch, classes, 1, 1);
  TOWERPS_CUDNN_CHECK(cudnnSoftmaxForward(s.cudnn.get(), CUDNN_SOFTMAX_LOG,
                                          CUDNN_SOFTMAX_MODE_INSTANCE, &kOne, t, logits, &kZero, t,
                                          log_probs));
  cuda::LaunchSoftmaxCrossEntropyFromLogProbs(batch, classes, log_probs, labels, grad_scale, loss,
                                              dlogits, s.stream.get());
}

void CudaBackend::SigmoidCrossEntropy(int batch, const float* logits, const int32_t* labels,
                                      float grad_scale, float* loss, float* dlogits) {
  impl_->Enter();
  cuda::LaunchSigmoidCrossEntropy(batch, logits, labels, grad_scale, loss, dlogits,
                                  impl_->stream.get());
}

void CudaBackend::SquaredError(int batch, int width, const float* outputs, const float* targets,
                               float grad_scale, float* loss, float* doutputs) {
  impl_->Enter();
  cuda::LaunchSquaredError(batch, width, outputs, targets, grad_scale, loss, doutputs,
                           impl_->stream.get());
}

// ---- Elementwise helpers ----

// ---- Batch norm, global average pooling, residual add (kernels/cuda/batch_norm.cuh) ----

double* CudaBackend::BatchNormPartials(int n, int c, int hw) {
  return static_cast<double*>(impl_->Scratch(sizeof(double) * 2 * static_cast<size_t>(c) *
                                             cuda::BatchNormSplits(n, c, hw)));
}

void CudaBackend::BatchNormForwardTraining(int n, int c, int hw, float epsilon, const float* x,
                                           const float* gamma, const float* beta, float* y,
                                           float* mean, float* var, float* inv_std) {
  impl_->Enter();
  cuda::LaunchBatchNormForwardTraining(n, c, hw, epsilon, x, gamma, beta, y, mean, var, inv_std,
                                       BatchNormPartials(n, c, hw), impl_->stream.get());
}
void CudaBackend::BatchNormForwardInference(int n, int c, int hw, float epsilon, const float* x,
                                            const float* gamma, const float* beta,
                                            const float* mean, const float* var, float* y) {
  impl_->Enter();
  cuda::LaunchBatchNormForwardInference(n, c, hw, epsilon, x, gamma, beta, mean, var, y,
                                        impl_->stream.get());
}
void CudaBackend::BatchNormBackward(int n, int c, int hw, const float* x, const float* dy,
                                    const float* gamma, const float* mean, const float* inv_std,
                                    float* dx, float* dgamma, float* dbeta) {
  impl_->Enter();
  cuda::LaunchBatchNormBackward(n, c, hw, x, dy, gamma, mean, inv_std, dx, dgamma, dbeta,
                                BatchNormPartials(n, c, hw), impl_->stream.get());
}
void CudaBackend::GlobalAvgPoolForward(int n, int c, int hw, const float* x, float* y) {
  impl_->Enter();
  cuda::LaunchGlobalAvgPoolForward(n, c, hw, x, y, impl_->stream.get());
}
void CudaBackend::GlobalAvgPoolBackward(int n, int c, int hw, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchGlobalAvgPoolBackward(n, c, hw, dy, dx, impl_->stream.get());
}
void CudaBackend::Add(int64_t n, const float* a, const float* b, float* y) {
  impl_->Enter();
  cuda::LaunchAdd(n, a, b, y, impl_->stream.get());
}

void CudaBackend::Axpy(int64_t n, float alpha, const float* x, float* y) {
  impl_->Enter();
  cuda::LaunchAxpy(n, alpha, x, y, impl_->stream.get());
}
void CudaBackend::Scale(int64_t n, float alpha, float* y) {
  impl_->Enter();
  cuda::LaunchScale(n, alpha, y, impl_->stream.get());
}
void CudaBackend::Fill(int64_t n, float value, float* y) {
  impl_->Enter();
  cuda::LaunchFill(n, value, y, impl_->stream.get());
}
void CudaBackend::AverageOf(int k, const float* const* in, int64_t n, float* out) {
  impl_->Enter();
  cuda::LaunchAverageOf(k, in, n, out, impl_->stream.get());
}
void CudaBackend::MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay,
                                 const float* g, float* v, float* p) {
  impl_->Enter();
  cuda::LaunchMomentumUpdate(n, lr, momentum, weight_decay, g, v, p, impl_->stream.get());
}

}  // namespace towerps::kernels
