#include "kernels/cuda/conv_planner.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "kernels/cuda/conv_filter_gemm.cuh"
#include "kernels/cuda/library_check.h"
#include "towerps/check.h"

namespace towerps::kernels::cuda {
namespace {

bool TensorCoreMath(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The algorithms that convolve through an FFT or a Winograd transform.
bool TransformAlgorithm(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool TransformAlgorithm(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool TransformAlgorithm(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

}  // namespace

ConvPlanner::ConvPlanner(cudnnHandle_t cudnn, CachingAllocator* allocator,
                         ConvPlannerOptions options)
    : cudnn_(cudnn), options_(std::move(options)), workspace_(allocator) {}

// Picks the first algorithm, in cuDNN's expected-speed order, that is supported with the math
// we allow, is not a transform algorithm unless those are allowed, and needs at most the
// workspace limit, and makes sure the workspace can be had; if
// it cannot, picks again within the workspace we have. `query(perf, count, &returned)` lists
// candidates; `size(algo, &bytes)` asks the workspace for one under the descriptor's current
// math type (and fails for an unsupported combination).
template <typename Perf, typename Algo, typename Query, typename Size>
void ConvPlanner::Choose(const char* what, Query query, Size size, Algo* algo,
                         cudnnMathType_t* math, size_t* bytes, cudnnConvolutionDescriptor_t conv) {
  const cudnnMathType_t strict = CUDNN_FMA_MATH;
  std::vector<Perf> perf(32);
  int returned = 0;
  TOWERPS_CUDNN_CHECK(
      cudnnSetConvolutionMathType(conv, options_.allow_tf32 ? CUDNN_DEFAULT_MATH : strict));
  TOWERPS_CUDNN_CHECK(query(perf.data(), static_cast<int>(perf.size()), &returned));
  perf.resize(static_cast<size_t>(std::max(returned, 0)));
  // Deterministic algorithms first, so reruns of a sync job give the same bits, as on the CPU;
  // an atomics-based one only when cuDNN offers nothing else for this shape.
  for (const bool deterministic_only : {true, false}) {
    for (size_t limit : {options_.workspace_limit_bytes, workspace_.size()}) {
      for (const Perf& p : perf) {
        if (p.status != CUDNN_STATUS_SUCCESS || p.memory > limit) continue;
        if (deterministic_only && p.determinism != CUDNN_DETERMINISTIC) continue;
        if (!options_.allow_tf32 && TensorCoreMath(p.mathType)) continue;
        if (!options_.allow_transform_algorithms && TransformAlgorithm(p.algo)) continue;
        const cudnnMathType_t m = options_.allow_tf32 ? p.mathType : strict;
        TOWERPS_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, m));
        size_t need = 0;
        if (size(p.algo, &need) != CUDNN_STATUS_SUCCESS || need > limit) continue;
        if (!workspace_.Grow(need).ok()) continue;
        *algo = p.algo;
        *math = m;
        *bytes = need;
        return;
      }
    }
  }
  TOWERPS_CHECK(false) << options_.device_name << ": cuDNN offers no usable " << what
                       << " algorithm for this convolution within " << workspace_.size()
                       << " bytes of workspace";
}

ConvPlan& ConvPlanner::Plan(const Conv2dShape& s) {
  const Key key{s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto plan = std::make_unique<ConvPlan>();
  ConvPlan& p = *plan;
  p.x = TensorDescriptor::Create();
  p.y = TensorDescriptor::Create();
  p.w = FilterDescriptor::Create();
  p.conv = ConvolutionDescriptor::Create();
  SetNchwFloat(p.x.get(), s.n, s.c, s.h, s.w);
  SetNchwFloat(p.y.get(), s.n, s.k, s.out_h(), s.out_w());
  TOWERPS_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p.w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                                 s.k, s.c, s.r, s.s));
  TOWERPS_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p.conv.get(), s.pad_h, s.pad_w, s.stride_h,
                                                      s.stride_w, 1, 1, CUDNN_CROSS_CORRELATION,
                                                      CUDNN_DATA_FLOAT));
  int dims[4] = {0, 0, 0, 0};
  TOWERPS_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(
      p.conv.get(), p.x.get(), p.w.get(), &dims[0], &dims[1], &dims[2], &dims[3]));
  TOWERPS_CHECK(dims[0] == s.n && dims[1] == s.k && dims[2] == s.out_h() && dims[3] == s.out_w())
      << "cuDNN's convolution output " << dims[0] << "x" << dims[1] << "x" << dims[2] << "x"
      << dims[3] << " differs from Conv2dShape's";

  const cudnnTensorDescriptor_t x = p.x.get(), y = p.y.get();
  const cudnnFilterDescriptor_t w = p.w.get();
  const cudnnConvolutionDescriptor_t conv = p.conv.get();
  Choose<cudnnConvolutionFwdAlgoPerf_t>(
      "forward",
      [&](cudnnConvolutionFwdAlgoPerf_t* perf, int count, int* returned) {
        return cudnnGetConvolutionForwardAlgorithm_v7(cudnn_, x, w, conv, y, count, returned, perf);
      },
      [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionForwardWorkspaceSize(cudnn_, x, w, conv, y, algo, bytes);
      },
      &p.fwd, &p.fwd_math, &p.fwd_bytes, conv);
  Choose<cudnnConvolutionBwdDataAlgoPerf_t>(
      "backward-data",
      [&](cudnnConvolutionBwdDataAlgoPerf_t* perf, int count, int* returned) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnn_, w, y, conv, x, count, returned,
                                                           perf);
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(cudnn_, w, y, conv, x, algo, bytes);
      },
      &p.bwd_data, &p.bwd_data_math, &p.bwd_data_bytes, conv);
  if (options_.filter_gradient_gemm && PlanFilterGemm(s, &p)) {
    return *plans_.emplace(key, std::move(plan)).first->second;
  }
  Choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
      "backward-filter",
      [&](cudnnConvolutionBwdFilterAlgoPerf_t* perf, int count, int* returned) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnn_, x, y, conv, w, count, returned,
                                                             perf);
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnn_, x, y, conv, w, algo, bytes);
      },
      &p.bwd_filter, &p.bwd_filter_math, &p.bwd_filter_bytes, conv);
  return *plans_.emplace(key, std::move(plan)).first->second;
}

bool ConvPlanner::PlanFilterGemm(const Conv2dShape& s, ConvPlan* p) {
  // As many images a pass as the limit allows (fewer, larger GEMMs), down to one.
  const auto bytes = [&](int images) {
    return static_cast<size_t>(FilterGemmWorkspaceFloats(s, images)) * sizeof(float);
  };
  const size_t partials = bytes(0), per_image = bytes(1) - partials;
  if (bytes(1) > options_.workspace_limit_bytes) return false;
  int images = static_cast<int>(
      std::min<size_t>(s.n, (options_.workspace_limit_bytes - partials) / per_image));
  while (images > 1 && !workspace_.Grow(bytes(images)).ok()) images /= 2;
  if (!workspace_.Grow(bytes(images)).ok()) return false;
  p->filter_gemm_images = images;
  p->bwd_filter_bytes = bytes(images);
  return true;
}

std::string ConvPlanner::Describe(const Conv2dShape& s) {
  const ConvPlan& p = Plan(s);
  std::string d = "cuDNN forward algo " + std::to_string(static_cast<int>(p.fwd)) +
                  ", backward-data algo " + std::to_string(static_cast<int>(p.bwd_data)) +
                  ", filter gradient ";
  if (p.filter_gemm_images > 0) {
    d += "im2col + batched GEMM (" + std::to_string(p.filter_gemm_images) + " images a pass)";
  } else {
    d += "cuDNN algo " + std::to_string(static_cast<int>(p.bwd_filter));
  }
  d += (options_.allow_tf32 ? ", TF32 allowed" : ", strict float32");
  return d + ", workspace " + std::to_string(workspace_.size() >> 20) + " MiB";
}

}  // namespace towerps::kernels::cuda
