#include "kernels/cuda/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "kernels/cuda/activation.cuh"
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/dropout.cuh"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/library_check.h"
#include "kernels/cuda/lrn.cuh"
#include "kernels/cuda/pooling.cuh"
#include "kernels/cuda/softmax_cross_entropy.cuh"
#include "kernels/gpu_devices.h"

namespace towerps::kernels {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;
// cuDNN tensor dimensions are int; elementwise cuDNN calls go in chunks of at most this many.
constexpr int64_t kMaxCudnnElements = int64_t{1} << 30;
// cuBLAS workspace (NVIDIA recommends 32 MiB on Hopper), from our allocator.
constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

using ConvKey = std::tuple<int, int, int, int, int, int, int, int, int, int, int>;

ConvKey KeyOf(const Conv2dShape& s) {
  return {s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w};
}

// One convolution shape's descriptors and chosen algorithms. The math type is a property of the
// convolution descriptor, so each op sets its own before it runs.
struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  cudnnMathType_t fwd_math = CUDNN_FMA_MATH, bwd_data_math = CUDNN_FMA_MATH,
                  bwd_filter_math = CUDNN_FMA_MATH;
  size_t fwd_bytes = 0, bwd_data_bytes = 0, bwd_filter_bytes = 0;

  ~ConvPlan() {
    if (x) TOWERPS_CUDNN_CHECK(cudnnDestroyTensorDescriptor(x));
    if (y) TOWERPS_CUDNN_CHECK(cudnnDestroyTensorDescriptor(y));
    if (w) TOWERPS_CUDNN_CHECK(cudnnDestroyFilterDescriptor(w));
    if (conv) TOWERPS_CUDNN_CHECK(cudnnDestroyConvolutionDescriptor(conv));
  }
};

bool TensorCoreMath(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

}  // namespace

struct CudaBackend::Impl {
  CudaBackendOptions options;
  std::string name;
  std::unique_ptr<cuda::CachingAllocator> allocator;
  cudaStream_t stream = nullptr;
  cudaStream_t copy_stream = nullptr;  // device-to-host copies that overlap compute
  uint64_t next_ticket = 1;
  std::map<uint64_t, std::pair<cudaEvent_t, cudaEvent_t>> copies;  // ticket: (ready, done)
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  void* cublas_workspace = nullptr;
  void* workspace = nullptr;  // convolution and LRN scratch, grown on demand
  size_t workspace_bytes = 0;
  void* scratch = nullptr;  // log-probabilities, the recomputed LRN output
  size_t scratch_bytes = 0;
  cudnnTensorDescriptor_t tensor_a = nullptr, tensor_b = nullptr;  // for the non-conv ops
  cudnnActivationDescriptor_t relu = nullptr, tanh = nullptr, sigmoid = nullptr;
  cudnnLRNDescriptor_t lrn = nullptr;
  std::map<ConvKey, std::unique_ptr<ConvPlan>> conv_plans;
  std::set<int> peers_tried;  // devices CopyFromPeer has tried to enable peer access to

  void Enter() const { TOWERPS_CUDA_CHECK(cudaSetDevice(options.device)); }

  // Grows `*buffer` to at least `bytes` (contents dropped). When the allocator cannot, the
  // buffer keeps its old size (plans chosen earlier rely on it) and the result is false.
  bool Ensure(void** buffer, size_t* have, size_t bytes) {
    if (*have >= bytes) return true;
    allocator->Free(*buffer);  // stream-ordered: queued users of the old buffer run first
    Result<void*> p = allocator->Allocate(bytes);
    if (p.ok()) {
      *buffer = *p;
      *have = bytes;
      return true;
    }
    // The block just freed is free again, so the old size always fits.
    Result<void*> old = allocator->Allocate(*have);
    TOWERPS_CHECK(old.ok()) << old.status().ToString();
    *buffer = *old;
    return false;
  }
  void* Scratch(size_t bytes) {
    TOWERPS_CHECK(Ensure(&scratch, &scratch_bytes, bytes))
        << name << ": out of device memory for " << bytes << " bytes of scratch (raise "
        << "--gpu-memory-fraction or lower the batch size)";
    return scratch;
  }

  void SetTensor(cudnnTensorDescriptor_t d, int n, int c, int h, int w) {
    TOWERPS_CUDNN_CHECK(
        cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w));
  }

  void ActivationForward(cudnnActivationDescriptor_t act, int64_t n, const float* x, float* y) {
    Enter();
    for (int64_t at = 0; at < n; at += kMaxCudnnElements) {
      const int len = static_cast<int>(std::min(kMaxCudnnElements, n - at));
      SetTensor(tensor_a, 1, 1, 1, len);
      TOWERPS_CUDNN_CHECK(
          cudnnActivationForward(cudnn, act, &kOne, tensor_a, x + at, &kZero, tensor_a, y + at));
    }
  }

  ConvPlan& Plan(const Conv2dShape& s);
  template <typename Perf, typename Algo, typename Query, typename Size>
  void Choose(const char* what, Query query, Size size, Algo* algo, cudnnMathType_t* math,
              size_t* bytes, cudnnConvolutionDescriptor_t conv);
};

// Picks the first algorithm, in cuDNN's expected-speed order, that is supported with the math
// we allow and needs at most the workspace limit, and makes sure the workspace can be had; if
// it cannot, picks again within the workspace we have. `query(perf, count, &returned)` lists
// candidates; `size(algo, &bytes)` asks the workspace for one under the descriptor's current
// math type (and fails for an unsupported combination).
template <typename Perf, typename Algo, typename Query, typename Size>
void CudaBackend::Impl::Choose(const char* what, Query query, Size size, Algo* algo,
                               cudnnMathType_t* math, size_t* bytes,
                               cudnnConvolutionDescriptor_t conv) {
  const cudnnMathType_t strict = CUDNN_FMA_MATH;
  std::vector<Perf> perf(32);
  int returned = 0;
  TOWERPS_CUDNN_CHECK(
      cudnnSetConvolutionMathType(conv, options.allow_tf32 ? CUDNN_DEFAULT_MATH : strict));
  TOWERPS_CUDNN_CHECK(query(perf.data(), static_cast<int>(perf.size()), &returned));
  perf.resize(static_cast<size_t>(std::max(returned, 0)));
  // Deterministic algorithms first, so reruns of a sync job give the same bits, as on the CPU;
  // an atomics-based one only when cuDNN offers nothing else for this shape.
  for (const bool deterministic_only : {true, false}) {
    for (size_t limit : {options.conv_workspace_limit_bytes, workspace_bytes}) {
      for (const Perf& p : perf) {
        if (p.status != CUDNN_STATUS_SUCCESS || p.memory > limit) continue;
        if (deterministic_only && p.determinism != CUDNN_DETERMINISTIC) continue;
        if (!options.allow_tf32 && TensorCoreMath(p.mathType)) continue;
        const cudnnMathType_t m = options.allow_tf32 ? p.mathType : strict;
        TOWERPS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, m));
        size_t need = 0;
        if (size(p.algo, &need) != CUDNN_STATUS_SUCCESS || need > limit) continue;
        if (!Ensure(&workspace, &workspace_bytes, need)) continue;
        *algo = p.algo;
        *math = m;
        *bytes = need;
        return;
      }
    }
  }
  TOWERPS_CHECK(false) << name << ": cuDNN offers no usable " << what
                       << " algorithm for this convolution within " << workspace_bytes
                       << " bytes of workspace";
}

ConvPlan& CudaBackend::Impl::Plan(const Conv2dShape& s) {
  auto it = conv_plans.find(KeyOf(s));
  if (it != conv_plans.end()) return *it->second;
  auto plan = std::make_unique<ConvPlan>();
  ConvPlan& p = *plan;
  TOWERPS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.x));
  TOWERPS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p.y));
  TOWERPS_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p.w));
  TOWERPS_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p.conv));
  SetTensor(p.x, s.n, s.c, s.h, s.w);
  SetTensor(p.y, s.n, s.k, s.out_h(), s.out_w());
  TOWERPS_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(p.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.k, s.c, s.r, s.s));
  TOWERPS_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv, s.pad_h, s.pad_w, s.stride_h,
                                                      s.stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT));
  int dims[4] = {0, 0, 0, 0};
  TOWERPS_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &dims[0], &dims[1],
                                                            &dims[2], &dims[3]));
  TOWERPS_CHECK(dims[0] == s.n && dims[1] == s.k && dims[2] == s.out_h() && dims[3] == s.out_w())
      << "cuDNN's convolution output " << dims[0] << "x" << dims[1] << "x" << dims[2] << "x"
      << dims[3] << " differs from Conv2dShape's";

  Choose<cudnnConvolutionFwdAlgoPerf_t>(
      "forward",
      [&](cudnnConvolutionFwdAlgoPerf_t* perf, int count, int* returned) {
        return cudnnGetConvolutionForwardAlgorithm_v7(cudnn, p.x, p.w, p.conv, p.y, count, returned,
                                                      perf);
      },
      [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(cudnn, p.x, p.w, p.conv, p.y, algo, bytes);
      },
      &p.fwd, &p.fwd_math, &p.fwd_bytes, p.conv);
  Choose<cudnnConvolutionBwdDataAlgoPerf_t>(
      "backward-data",
      [&](cudnnConvolutionBwdDataAlgoPerf_t* perf, int count, int* returned) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn, p.w, p.y, p.conv, p.x, count,
                                                           returned, perf);
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn, p.w, p.y, p.conv, p.x, algo,
                                                            bytes);
      },
      &p.bwd_data, &p.bwd_data_math, &p.bwd_data_bytes, p.conv);
  Choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
      "backward-filter",
      [&](cudnnConvolutionBwdFilterAlgoPerf_t* perf, int count, int* returned) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn, p.x, p.y, p.conv, p.w, count,
                                                             returned, perf);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn, p.x, p.y, p.conv, p.w, algo,
                                                              bytes);
      },
      &p.bwd_filter, &p.bwd_filter_math, &p.bwd_filter_bytes, p.conv);
  return *conv_plans.emplace(KeyOf(s), std::move(plan)).first->second;
}

Result<std::unique_ptr<CudaBackend>> CudaBackend::Create(const CudaBackendOptions& options) {
  TOWERPS_RETURN_IF_ERROR(options.memory.Validate());
  std::string why;
  const std::vector<GpuInfo> gpus = ListGpus(&why);
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
  TOWERPS_CUDA_CHECK(cudaStreamCreateWithFlags(&impl->stream, cudaStreamNonBlocking));
  TOWERPS_CUDA_CHECK(cudaStreamCreateWithFlags(&impl->copy_stream, cudaStreamNonBlocking));
  TOWERPS_CUBLAS_CHECK(cublasCreate(&impl->cublas));
  TOWERPS_CUBLAS_CHECK(cublasSetStream(impl->cublas, impl->stream));
  TOWERPS_CUBLAS_CHECK(cublasSetPointerMode(impl->cublas, CUBLAS_POINTER_MODE_HOST));
  TOWERPS_CUBLAS_CHECK(cublasSetMathMode(
      impl->cublas, options.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  TOWERPS_CUDNN_CHECK(cudnnCreate(&impl->cudnn));
  TOWERPS_CUDNN_CHECK(cudnnSetStream(impl->cudnn, impl->stream));
  // Then the memory share: a worker that does not fit fails here, cleanly (the destructor
  // releases what exists so far).
  std::unique_ptr<CudaBackend> backend(new CudaBackend(std::move(impl)));
  Impl& s = *backend->impl_;
  TOWERPS_ASSIGN_OR_RETURN(s.allocator,
                           cuda::CreateDeviceAllocator(options.device, options.memory));
  TOWERPS_ASSIGN_OR_RETURN(s.cublas_workspace, s.allocator->Allocate(kCublasWorkspaceBytes));
  TOWERPS_CUBLAS_CHECK(cublasSetWorkspace(s.cublas, s.cublas_workspace, kCublasWorkspaceBytes));
  TOWERPS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s.tensor_a));
  TOWERPS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&s.tensor_b));
  const std::pair<cudnnActivationDescriptor_t*, cudnnActivationMode_t> acts[] = {
      {&s.relu, CUDNN_ACTIVATION_RELU},
      {&s.tanh, CUDNN_ACTIVATION_TANH},
      {&s.sigmoid, CUDNN_ACTIVATION_SIGMOID}};
  for (const auto& [desc, mode] : acts) {
    TOWERPS_CUDNN_CHECK(cudnnCreateActivationDescriptor(desc));
    TOWERPS_CUDNN_CHECK(cudnnSetActivationDescriptor(*desc, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  TOWERPS_CUDNN_CHECK(cudnnCreateLRNDescriptor(&s.lrn));
  return backend;
}

CudaBackend::CudaBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudaBackend::~CudaBackend() {
  Impl& s = *impl_;
  s.Enter();
  if (s.stream) TOWERPS_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  if (s.copy_stream) TOWERPS_CUDA_CHECK(cudaStreamSynchronize(s.copy_stream));
  for (auto& [ticket, events] : s.copies) {
    TOWERPS_CUDA_CHECK(cudaEventDestroy(events.first));
    TOWERPS_CUDA_CHECK(cudaEventDestroy(events.second));
  }
  s.conv_plans.clear();
  if (s.lrn) TOWERPS_CUDNN_CHECK(cudnnDestroyLRNDescriptor(s.lrn));
  for (cudnnActivationDescriptor_t d : {s.relu, s.tanh, s.sigmoid}) {
    if (d) TOWERPS_CUDNN_CHECK(cudnnDestroyActivationDescriptor(d));
  }
  for (cudnnTensorDescriptor_t d : {s.tensor_a, s.tensor_b}) {
    if (d) TOWERPS_CUDNN_CHECK(cudnnDestroyTensorDescriptor(d));
  }
  if (s.cudnn) TOWERPS_CUDNN_CHECK(cudnnDestroy(s.cudnn));
  if (s.cublas) TOWERPS_CUBLAS_CHECK(cublasDestroy(s.cublas));
  if (s.allocator) {
    s.allocator->Free(s.cublas_workspace);
    s.allocator->Free(s.workspace);
    s.allocator->Free(s.scratch);
  }
  if (s.stream) TOWERPS_CUDA_CHECK(cudaStreamDestroy(s.stream));
  if (s.copy_stream) TOWERPS_CUDA_CHECK(cudaStreamDestroy(s.copy_stream));
  s.allocator.reset();  // returns the device memory
}

std::string CudaBackend::name() const { return impl_->name; }
int CudaBackend::device() const { return impl_->options.device; }
cuda::AllocatorStats CudaBackend::memory_stats() const { return impl_->allocator->stats(); }

// ---- MemorySpace ----

Result<void*> CudaBackend::Allocate(size_t bytes) { return impl_->allocator->Allocate(bytes); }
void CudaBackend::Free(void* p) { impl_->allocator->Free(p); }

void CudaBackend::CopyFromHost(const void* host, size_t bytes, void* dst) {
  if (bytes == 0) return;
  impl_->Enter();
  TOWERPS_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, impl_->stream));
  // The caller may reuse `host` when we return; for pinned memory the copy may still be in
  // flight, so wait for it.
  TOWERPS_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
}

void CudaBackend::CopyFromHostAsync(const void* host, size_t bytes, void* dst) {
  if (bytes == 0) return;
  impl_->Enter();
  TOWERPS_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, impl_->stream));
}

void CudaBackend::CopyToHost(const void* src, size_t bytes, void* host) {
  if (bytes == 0) return;
  impl_->Enter();
  TOWERPS_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, impl_->stream));
  TOWERPS_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
}

void CudaBackend::Copy(const void* src, size_t bytes, void* dst) {
  if (bytes == 0) return;
  impl_->Enter();
  TOWERPS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, impl_->stream));
}

void CudaBackend::Synchronize() {
  impl_->Enter();
  TOWERPS_CUDA_CHECK(cudaStreamSynchronize(impl_->stream));
  // MemorySpace: every queued op *and copy*, so also the copy stream's CopyToHostAsync copies.
  TOWERPS_CUDA_CHECK(cudaStreamSynchronize(impl_->copy_stream));
}

uint64_t CudaBackend::CopyToHostAsync(const void* src, size_t bytes, void* host) {
  Impl& s = *impl_;
  s.Enter();
  cudaEvent_t ready = nullptr, done = nullptr;
  TOWERPS_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  TOWERPS_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  // The copy waits for what the compute stream has queued so far (the producer of src), and
  // the compute stream goes on without waiting for the copy.
  TOWERPS_CUDA_CHECK(cudaEventRecord(ready, s.stream));
  TOWERPS_CUDA_CHECK(cudaStreamWaitEvent(s.copy_stream, ready, 0));
  if (bytes > 0) {
    TOWERPS_CUDA_CHECK(cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, s.copy_stream));
  }
  TOWERPS_CUDA_CHECK(cudaEventRecord(done, s.copy_stream));
  const uint64_t ticket = s.next_ticket++;
  s.copies.emplace(ticket, std::make_pair(ready, done));
  return ticket;
}

void CudaBackend::WaitCopy(uint64_t ticket) {
  Impl& s = *impl_;
  auto it = s.copies.find(ticket);
  TOWERPS_CHECK(it != s.copies.end()) << "WaitCopy of unknown ticket " << ticket;
  s.Enter();
  TOWERPS_CUDA_CHECK(cudaEventSynchronize(it->second.second));
  TOWERPS_CUDA_CHECK(cudaEventDestroy(it->second.first));
  TOWERPS_CUDA_CHECK(cudaEventDestroy(it->second.second));
  s.copies.erase(it);
}

void CudaBackend::PinHostMemory(void* host, size_t bytes) {
  if (host == nullptr || bytes == 0) return;
  impl_->Enter();
  if (cudaHostRegister(host, bytes, cudaHostRegisterDefault) != cudaSuccess) {
    cudaGetLastError();  // not fatal: copies from pageable memory are only slower
  }
}

void CudaBackend::UnpinHostMemory(void* host) {
  if (host == nullptr) return;
  impl_->Enter();
  if (cudaHostUnregister(host) != cudaSuccess) cudaGetLastError();  // it was never pinned
}

void CudaBackend::CopyFromPeer(CudaBackend& from, const void* src, size_t bytes, void* dst) {
  if (bytes == 0) return;
  if (&from == this) return Copy(src, bytes, dst);
  // Order after `from`'s queued work (the producer of src) with an event, then copy on ours.
  from.impl_->Enter();
  cudaEvent_t ready = nullptr;
  TOWERPS_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
  TOWERPS_CUDA_CHECK(cudaEventRecord(ready, from.impl_->stream));
  impl_->Enter();
  // Without peer access enabled (from our device to `from`'s) cudaMemcpyPeerAsync is correct but
  // staged through host memory; with it the copy goes directly (NVLink or PCIe P2P). Best
  // effort, once per peer device: where it cannot be enabled the staged copy stays.
  if (from.device() != device() && impl_->peers_tried.insert(from.device()).second) {
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, device(), from.device()) != cudaSuccess || !can ||
        cudaDeviceEnablePeerAccess(from.device(), 0) != cudaSuccess) {
      cudaGetLastError();  // not sticky; e.g. cudaErrorPeerAccessAlreadyEnabled
    }
  }
  TOWERPS_CUDA_CHECK(cudaStreamWaitEvent(impl_->stream, ready, 0));
  TOWERPS_CUDA_CHECK(cudaMemcpyPeerAsync(dst, device(), src, from.device(), bytes, impl_->stream));
  TOWERPS_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait has completed
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
  TOWERPS_CUBLAS_CHECK(cublasSgemm(impl_->cublas, op_b, op_a, n, m, k, &alpha, b, std::max(ldb, 1),
                                   a, std::max(lda, 1), &beta, c, n));
}

void CudaBackend::BiasAdd(int outer, int channels, int inner, const float* bias, float* y) {
  impl_->Enter();
  cuda::LaunchBiasAdd(outer, channels, inner, bias, y, impl_->stream);
}

void CudaBackend::BiasBackward(int outer, int channels, int inner, const float* dy, float* db) {
  impl_->Enter();
  cuda::LaunchBiasBackward(outer, channels, inner, dy, db, impl_->stream);
}

// ---- Convolution ----

void CudaBackend::Conv2dForward(const Conv2dShape& s, const float* x, const float* w, float* y) {
  impl_->Enter();
  ConvPlan& p = impl_->Plan(s);
  TOWERPS_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.fwd_math));
  TOWERPS_CUDNN_CHECK(cudnnConvolutionForward(impl_->cudnn, &kOne, p.x, x, p.w, w, p.conv, p.fwd,
                                              impl_->workspace, p.fwd_bytes, &kZero, p.y, y));
}

void CudaBackend::Conv2dBackwardData(const Conv2dShape& s, const float* dy, const float* w,
                                     float* dx) {
  impl_->Enter();
  ConvPlan& p = impl_->Plan(s);
  TOWERPS_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.bwd_data_math));
  TOWERPS_CUDNN_CHECK(cudnnConvolutionBackwardData(impl_->cudnn, &kOne, p.w, w, p.y, dy, p.conv,
                                                   p.bwd_data, impl_->workspace, p.bwd_data_bytes,
                                                   &kZero, p.x, dx));
}

void CudaBackend::Conv2dBackwardFilter(const Conv2dShape& s, const float* x, const float* dy,
                                       float* dw) {
  impl_->Enter();
  ConvPlan& p = impl_->Plan(s);
  TOWERPS_CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv, p.bwd_filter_math));
  TOWERPS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(impl_->cudnn, &kOne, p.x, x, p.y, dy, p.conv,
                                                     p.bwd_filter, impl_->workspace,
                                                     p.bwd_filter_bytes, &kZero, p.w, dw));
}

// ---- Pooling ----

void CudaBackend::MaxPoolForward(const Pool2dShape& s, const float* x, float* y) {
  impl_->Enter();
  cuda::LaunchMaxPoolForward(s, x, y, impl_->stream);
}
void CudaBackend::MaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy,
                                  float* dx) {
  impl_->Enter();
  cuda::LaunchMaxPoolBackward(s, x, dy, dx, impl_->stream);
}
void CudaBackend::AvgPoolForward(const Pool2dShape& s, const float* x, float* y) {
  impl_->Enter();
  cuda::LaunchAvgPoolForward(s, x, y, impl_->stream);
}
void CudaBackend::AvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchAvgPoolBackward(s, dy, dx, impl_->stream);
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
  cuda::LaunchActivationBackward(cuda::ActivationGradient::kRelu, n, y, dy, dx, impl_->stream);
}
void CudaBackend::TanhBackward(int64_t n, const float* y, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchActivationBackward(cuda::ActivationGradient::kTanh, n, y, dy, dx, impl_->stream);
}
void CudaBackend::SigmoidBackward(int64_t n, const float* y, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchActivationBackward(cuda::ActivationGradient::kSigmoid, n, y, dy, dx, impl_->stream);
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
  if (!LrnMapsOntoCudnn(p)) return cuda::LaunchLrnForward(n, c, hw, p, x, y, s.stream);
  const unsigned window = static_cast<unsigned>(2 * p.depth_radius + 1);
  TOWERPS_CUDNN_CHECK(cudnnSetLRNDescriptor(s.lrn, window, double{p.alpha} * window, double{p.beta},
                                            double{p.bias}));
  s.SetTensor(s.tensor_a, n, c, hw, 1);
  TOWERPS_CUDNN_CHECK(cudnnLRNCrossChannelForward(s.cudnn, s.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                                  &kOne, s.tensor_a, x, &kZero, s.tensor_a, y));
}

void CudaBackend::LrnBackward(int n, int c, int hw, const LrnParams& p, const float* x,
                              const float* dy, float* dx) {
  Impl& s = *impl_;
  s.Enter();
  if (!LrnMapsOntoCudnn(p)) return cuda::LaunchLrnBackward(n, c, hw, p, x, dy, dx, s.stream);
  // cuDNN's backward wants the forward output too; the interface passes only x, so recompute it.
  float* y = static_cast<float*>(s.Scratch(sizeof(float) * static_cast<size_t>(n) * c * hw));
  LrnForward(n, c, hw, p, x, y);
  TOWERPS_CUDNN_CHECK(cudnnLRNCrossChannelBackward(s.cudnn, s.lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                                   &kOne, s.tensor_a, y, s.tensor_a, dy, s.tensor_a,
                                                   x, &kZero, s.tensor_a, dx));
}

// ---- Dropout, loss ----

void CudaBackend::DropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                                 float* y) {
  impl_->Enter();
  cuda::LaunchDropoutForward(n, rate, seed, x, mask, y, impl_->stream);
}

void CudaBackend::DropoutBackward(int64_t n, const float* mask, const float* dy, float* dx) {
  impl_->Enter();
  cuda::LaunchDropoutBackward(n, mask, dy, dx, impl_->stream);
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
  s.SetTensor(s.tensor_b, batch, classes, 1, 1);
  TOWERPS_CUDNN_CHECK(cudnnSoftmaxForward(s.cudnn, CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE,
                                          &kOne, s.tensor_b, logits, &kZero, s.tensor_b,
                                          log_probs));
  cuda::LaunchSoftmaxCrossEntropyFromLogProbs(batch, classes, log_probs, labels, grad_scale, loss,
                                              dlogits, s.stream);
}

// ---- Elementwise helpers ----

void CudaBackend::Axpy(int64_t n, float alpha, const float* x, float* y) {
  impl_->Enter();
  cuda::LaunchAxpy(n, alpha, x, y, impl_->stream);
}
void CudaBackend::Scale(int64_t n, float alpha, float* y) {
  impl_->Enter();
  cuda::LaunchScale(n, alpha, y, impl_->stream);
}
void CudaBackend::Fill(int64_t n, float value, float* y) {
  impl_->Enter();
  cuda::LaunchFill(n, value, y, impl_->stream);
}
void CudaBackend::AverageOf(int k, const float* const* in, int64_t n, float* out) {
  impl_->Enter();
  cuda::LaunchAverageOf(k, in, n, out, impl_->stream);
}
void CudaBackend::MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay,
                                 const float* g, float* v, float* p) {
  impl_->Enter();
  cuda::LaunchMomentumUpdate(n, lr, momentum, weight_decay, g, v, p, impl_->stream);
}

}  // namespace towerps::kernels
