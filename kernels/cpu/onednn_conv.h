// OnednnConv: one convolution shape's oneDNN primitives (forward, backward data, backward
// weights), created once and then run any number of times, on the calling thread.
//
// Why: oneDNN's direct AVX-512 kernels run the 3x3 convolutions of 16 or more channels about
// 1.5x faster than im2col + OpenBLAS on this CPU (docs/PERFORMANCE.md, "ResNet-20"). They want
// blocked layouts (nChw16c, OIhw16i16o); TowerPS's tensors are NCHW and OIHW, so a call reorders
// its inputs in and its outputs back, through the caller's arena. The reorders are counted in
// the measurements that choose the path (kernels/cpu/conv_planner.h).
//
// Contract:
//  - Built for Conv2dShape s: every call convolves s.n images. The algorithm is oneDNN's direct
//    convolution and the layouts are fixed at creation, so one shape always runs the same code
//    and a rerun gives the same bits (on the same CPU type).
//  - Calls run on the calling thread alone: each keeps oneDNN's OpenMP team at one thread for its
//    duration (OneThreadScope) and restores the caller's setting. The CPU backend's pool runs
//    pieces of a batch in parallel.
//  - Calls are thread-safe: the primitives are shared and read-only; each caller passes its own
//    stream and an arena of at least arena_floats() floats (the blocked copies and oneDNN's
//    scratchpad; its contents do not survive the call).
//  - Errors (oneDNN rejecting the shape) throw dnnl::error from Create; the planner turns that
//    into a choice of im2col. Execution does not fail on a created primitive.
#ifndef TOWERPS_KERNELS_CPU_ONEDNN_CONV_H_
#define TOWERPS_KERNELS_CPU_ONEDNN_CONV_H_

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/shapes.h"

namespace towerps::kernels::cpu {

class OnednnConv {
 public:
  static std::unique_ptr<OnednnConv> Create(const dnnl::engine& engine, const Conv2dShape& s);

  size_t arena_floats() const { return arena_floats_; }
  // oneDNN's names for its implementations: "jit:avx512_core/jit:avx512_core/jit:avx512_core".
  const std::string& impl() const { return impl_; }

  // As the Backend<float> ops of the same names (kernels/backend.h), for s.n images.
  void Forward(dnnl::stream& stream, float* arena, const float* x, const float* w, float* y) const;
  void BackwardData(dnnl::stream& stream, float* arena, const float* dy, const float* w,
                    float* dx) const;
  void BackwardFilter(dnnl::stream& stream, float* arena, const float* x, const float* dy,
                      float* dw) const;

 private:
  // One operand as TowerPS holds it (`plain`) and as a primitive wants it (`inner`), with the
  // reorder between them when they differ: plain to inner for an input, back for an output.
  struct Operand {
    int arg = 0;  // DNNL_ARG_SRC, ...
    dnnl::memory::desc plain, inner;
    dnnl::reorder reorder;       // empty when plain == inner
    dnnl::memory::desc scratch;  // the reorder's scratchpad, from the arena (usually empty)
    bool same() const { return plain == inner; }
  };
  // One of the three passes: its primitive, its scratchpad, two inputs and an output.
  struct Pass {
    dnnl::primitive primitive;
    dnnl::memory::desc scratch;
    Operand a, b, out;
    size_t ArenaFloats() const;
  };
  class Arena;

  explicit OnednnConv(dnnl::engine engine) : engine_(std::move(engine)) {}
  // `from` and `to` are plain and inner for an input, inner and plain for an output.
  Operand Between(int arg, const dnnl::memory::desc& from, const dnnl::memory::desc& to,
                  bool input) const;
  Operand Input(int arg, const dnnl::memory::desc& plain, const dnnl::memory::desc& inner) const {
    return Between(arg, plain, inner, true);
  }
  Operand Output(int arg, const dnnl::memory::desc& plain, const dnnl::memory::desc& inner) const {
    return Between(arg, inner, plain, false);
  }
  void Run(const Pass& pass, dnnl::stream& stream, float* arena, const float* a, const float* b,
           float* out) const;
  void Reorder(const Operand& op, dnnl::stream& stream, Arena& space, dnnl::memory& from,
               dnnl::memory& to) const;

  dnnl::engine engine_;
  Pass forward_, backward_data_, backward_weights_;
  size_t arena_floats_ = 0;
  std::string impl_;
};

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_ONEDNN_CONV_H_
