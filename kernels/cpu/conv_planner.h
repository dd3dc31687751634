// ConvPlanner: the CPU backend's choice, per convolution shape, between im2col + OpenBLAS
// (kernels/cpu/conv.h) and oneDNN (kernels/cpu/onednn_conv.h), and the oneDNN primitives of the
// shapes it gives to oneDNN, built once, on first sight of the shape, and reused.
//
// How a batch runs on oneDNN: it is cut into one piece per pool thread (image ranges fixed by n
// and the pool's size), each piece runs on its thread with oneDNN kept single-threaded, and the
// filter gradient's per-piece partials are added in piece order. So there is one thread pool,
// ours, and the bits depend only on the shape and the pool's size, never on scheduling.
//
// The choice (ConvAlgorithm::kAuto) is a rule on the shape, not a timing taken at run time, so
// that it never changes between runs: oneDNN wherever the measurements of `towerps-bench convs`
// found it faster (conv_planner.cc gives the rule and the figures behind it).
//
// Contract:
//  - Not thread-safe, like the backend that owns it: one op at a time.
//  - Plans live as long as the planner. A shape oneDNN rejects falls back to im2col.
//  - kOnednn without oneDNN in the build is refused by CpuBackend::Create (Available()).
#ifndef TOWERPS_KERNELS_CPU_CONV_PLANNER_H_
#define TOWERPS_KERNELS_CPU_CONV_PLANNER_H_

#include <array>
#include <map>
#include <memory>
#include <string>

#include "common/enum_names.h"
#include "kernels/cpu/cpu_context.h"
#include "kernels/shapes.h"

namespace towerps::kernels::cpu {

enum class ConvAlgorithm {
  kAuto,    // per shape, by the measured rule
  kIm2col,  // im2col + OpenBLAS sgemm everywhere
  kOnednn,  // oneDNN everywhere (tests and benchmarks)
};
// The names of --cpu-conv (towerps-worker, towerps-bench train).
inline constexpr EnumNames<ConvAlgorithm, 3> kConvAlgorithms{
    "--cpu-conv",
    {{{ConvAlgorithm::kAuto, "auto"},
      {ConvAlgorithm::kIm2col, "im2col"},
      {ConvAlgorithm::kOnednn, "onednn"}}}};

class ConvPlanner {
 public:
  ConvPlanner(ConvAlgorithm algorithm, int threads);
  ~ConvPlanner();
  ConvPlanner(const ConvPlanner&) = delete;
  ConvPlanner& operator=(const ConvPlanner&) = delete;

  // Whether this build has oneDNN (TOWERPS_ONEDNN).
  static bool Available();

  // The path that runs s, planned now if s is new: "im2col+sgemm" or "onednn <impl>".
  const std::string& Describe(const Conv2dShape& s);
  // Each runs s on oneDNN and returns true when its plan says oneDNN; otherwise returns false
  // having done nothing, and the caller runs im2col (conv.h).
  bool Forward(CpuContext& ctx, const Conv2dShape& s, const float* x, const float* w, float* y);
  bool BackwardData(CpuContext& ctx, const Conv2dShape& s, const float* dy, const float* w,
                    float* dx);
  bool BackwardFilter(CpuContext& ctx, const Conv2dShape& s, const float* x, const float* dy,
                      float* dw);

 private:
  struct Plan;
  struct Onednn;  // engine, streams; conv_planner.cc
  using Key = std::array<int, 11>;

  Plan& PlanFor(const Conv2dShape& s);

  [[maybe_unused]] const ConvAlgorithm algorithm_;  // unused without oneDNN
  [[maybe_unused]] const int threads_;
  std::unique_ptr<Onednn> onednn_;  // null without oneDNN or with kIm2col
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_CONV_PLANNER_H_
