// ConvPlanner: the CUDA backend's convolution plans. For each Conv2dShape it builds the cuDNN
// descriptors and chooses the forward, backward-data and backward-filter algorithms once
// (cudnnGet*Algorithm_v7, first acceptable in cuDNN's expected-speed order, deterministic ones
// first) and caches them, and it owns the workspace they run in. The filter gradient is, by
// default, not cuDNN's but im2col and a batched GEMM (conv_filter_gemm.cuh), with cuDNN's as the
// fallback when the workspace for it cannot be had. Internal to kernels/cuda; the backend runs
// the convolutions (cuda_backend.cc).
//
// Contract:
//  - The cuDNN handle and the allocator are borrowed and must outlive the planner. The workspace
//    comes from the allocator and grows when a new plan needs more; it is used only on the
//    handle's stream (the backend's compute stream), so growing it is safe (device_buffer.h).
//  - Plans live, at stable addresses, as long as the planner; workspace() is valid until the
//    next Plan() (a new plan may move it).
//  - Not thread-safe, like the backend. Call with the handle's device current.
//  - Errors abort: cuDNN offering no usable algorithm within the workspace that can be had, or a
//    cuDNN output shape that differs from Conv2dShape's (bugs or an unsupported configuration).
#ifndef TOWERPS_KERNELS_CUDA_CONV_PLANNER_H_
#define TOWERPS_KERNELS_CUDA_CONV_PLANNER_H_

#include <cudnn.h>

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "kernels/cuda/caching_allocator.h"
#include "kernels/cuda/cuda_handles.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/shapes.h"

namespace towerps::kernels::cuda {

struct ConvPlannerOptions {
  // Let cuDNN use TF32 tensor cores; otherwise strict float32 (CUDNN_FMA_MATH).
  bool allow_tf32 = false;
  // Let cuDNN pick its FFT and Winograd algorithms. They compute the convolution through a
  // transform whose float32 rounding error is about 1e-4 of the largest output, not 1e-6 of
  // each element as the direct and GEMM algorithms: on the cifar10 model that moved a 50-step
  // loss trajectory 2.5e-3 away from the CPU's (an H100, 2026-11-23). Off unless asked for.
  bool allow_transform_algorithms = false;
  // The filter gradient as im2col and a batched GEMM (conv_filter_gemm.cuh) instead of cuDNN's
  // deterministic backward-filter algorithm, which runs at under 1 TFLOP/s on few channels.
  bool filter_gradient_gemm = true;
  // Most workspace one algorithm may use; faster algorithms needing more are skipped.
  size_t workspace_limit_bytes = size_t{512} << 20;
  // For messages only: "gpu:0".
  std::string device_name = "gpu:0";
};

// One convolution shape's descriptors and chosen algorithms, with the math type and workspace
// bytes each needs. The math type is a property of the convolution descriptor, so each op sets
// its own on `conv` before it runs.
struct ConvPlan {
  TensorDescriptor x, y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  cudnnConvolutionFwdAlgo_t fwd{};
  cudnnConvolutionBwdDataAlgo_t bwd_data{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
  cudnnMathType_t fwd_math = CUDNN_FMA_MATH, bwd_data_math = CUDNN_FMA_MATH,
                  bwd_filter_math = CUDNN_FMA_MATH;
  size_t fwd_bytes = 0, bwd_data_bytes = 0, bwd_filter_bytes = 0;
  // > 0: the filter gradient is FilterGradientAsGemm's, this many images a pass, in
  // bwd_filter_bytes of workspace (bwd_filter is then unused); 0: cuDNN's bwd_filter.
  int filter_gemm_images = 0;
};

class ConvPlanner {
 public:
  ConvPlanner(cudnnHandle_t cudnn, CachingAllocator* allocator, ConvPlannerOptions options);
  ConvPlanner(const ConvPlanner&) = delete;
  ConvPlanner& operator=(const ConvPlanner&) = delete;

  // The plan for `s`, made on first use; the workspace is then at least as large as each of its
  // algorithms needs.
  ConvPlan& Plan(const Conv2dShape& s);
  void* workspace() const { return workspace_.data(); }
  // One line on `s`'s plan for logs: each algorithm, and the workspace.
  std::string Describe(const Conv2dShape& s);

 private:
  using Key = std::tuple<int, int, int, int, int, int, int, int, int, int, int>;

  template <typename Perf, typename Algo, typename Query, typename Size>
  void Choose(const char* what, Query query, Size size, Algo* algo, cudnnMathType_t* math,
              size_t* bytes, cudnnConvolutionDescriptor_t conv);
  // Sets p.filter_gemm_images and p.bwd_filter_bytes when FilterGradientAsGemm fits the
  // workspace limit and the workspace can grow to it; false otherwise.
  bool PlanFilterGemm(const Conv2dShape& s, ConvPlan* p);

  const cudnnHandle_t cudnn_;
  const ConvPlannerOptions options_;
  DeviceBuffer workspace_;                          // declared before the plans that use it
  std::map<Key, std::unique_ptr<ConvPlan>> plans_;  // by shape
};

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_CONV_PLANNER_H_
