// OnednnConv (kernels/cpu/onednn_conv.h): oneDNN's direct convolution on one thread, with the
// reorders between TowerPS's plain layouts and oneDNN's blocked ones.
#include "kernels/cpu/onednn_conv.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>

namespace towerps::kernels::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
constexpr size_t kAlignFloats = 16;  // 64 bytes

// Keeps oneDNN on the calling thread: Debian's oneDNN runs on OpenMP, whose team size is the
// calling thread's nthreads-var. Primitives created at one thread also plan for one.
class OneThreadScope {
 public:
  OneThreadScope() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~OneThreadScope() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  OneThreadScope(const OneThreadScope&) = delete;
  OneThreadScope& operator=(const OneThreadScope&) = delete;

 private:
  const int saved_;
};

size_t Floats(const memory::desc& d) { return (d.get_size() + sizeof(float) - 1) / sizeof(float); }
size_t Aligned(size_t floats) { return (floats + kAlignFloats - 1) / kAlignFloats * kAlignFloats; }

// The floats an op needs beyond the caller's buffers: the blocked copies and the scratchpad.
template <typename... Ops>
size_t ArenaFloats(const memory::desc& scratch, const Ops&... ops) {
  size_t total = Aligned(Floats(scratch));
  ((total += ops.same() ? 0 : Aligned(Floats(ops.inner))), ...);
  return total + kAlignFloats;  // room to align the start
}

}  // namespace

// Hands out 64-byte-aligned pieces of the caller's arena, in order.
class OnednnConv::Arena {
 public:
  explicit Arena(float* base) {
    const auto a = reinterpret_cast<uintptr_t>(base);
    next_ = base + (kAlignFloats - (a / sizeof(float)) % kAlignFloats) % kAlignFloats;
  }
  float* Take(const memory::desc& d) {
    float* p = next_;
    next_ += Aligned(Floats(d));
    return p;
  }

 private:
  float* next_;
};

std::unique_ptr<OnednnConv> OnednnConv::Create(const dnnl::engine& engine, const Conv2dShape& s) {
  OneThreadScope one_thread;
  const memory::dims x{s.n, s.c, s.h, s.w}, w{s.k, s.c, s.r, s.s},
      y{s.n, s.k, s.out_h(), s.out_w()}, strides{s.stride_h, s.stride_w}, pad{s.pad_h, s.pad_w};
  const memory::desc any_x(x, kF32, Tag::any), any_w(w, kF32, Tag::any), any_y(y, kF32, Tag::any);
  const memory::desc plain_x(x, kF32, Tag::nchw), plain_w(w, kF32, Tag::oihw),
      plain_y(y, kF32, Tag::nchw);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const auto direct = dnnl::algorithm::convolution_direct;

  const dnnl::convolution_forward::primitive_desc fpd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, direct, any_x, any_w,
                                      any_y, strides, pad, pad),
      attr, engine);
  const dnnl::convolution_backward_data::primitive_desc dpd(
      dnnl::convolution_backward_data::desc(direct, any_x, any_w, any_y, strides, pad, pad), attr,
      engine, fpd);
  const dnnl::convolution_backward_weights::primitive_desc wpd(
      dnnl::convolution_backward_weights::desc(direct, any_x, any_w, any_y, strides, pad, pad),
      attr, engine, fpd);

  std::unique_ptr<OnednnConv> c(new OnednnConv(engine));
  c->forward_ = dnnl::convolution_forward(fpd);
  c->backward_data_ = dnnl::convolution_backward_data(dpd);
  c->backward_weights_ = dnnl::convolution_backward_weights(wpd);
  c->forward_scratch_ = fpd.scratchpad_desc();
  c->data_scratch_ = dpd.scratchpad_desc();
  c->weights_scratch_ = wpd.scratchpad_desc();
  c->fx_ = c->Input(plain_x, fpd.src_desc());
  c->fw_ = c->Input(plain_w, fpd.weights_desc());
  c->fy_ = c->Output(plain_y, fpd.dst_desc());
  c->ddy_ = c->Input(plain_y, dpd.diff_dst_desc());
  c->dw_ = c->Input(plain_w, dpd.weights_desc());
  c->ddx_ = c->Output(plain_x, dpd.diff_src_desc());
  c->wx_ = c->Input(plain_x, wpd.src_desc());
  c->wdy_ = c->Input(plain_y, wpd.diff_dst_desc());
  c->wdw_ = c->Output(plain_w, wpd.diff_weights_desc());
  c->arena_floats_ = std::max({ArenaFloats(c->forward_scratch_, c->fx_, c->fw_, c->fy_),
                               ArenaFloats(c->data_scratch_, c->ddy_, c->dw_, c->ddx_),
                               ArenaFloats(c->weights_scratch_, c->wx_, c->wdy_, c->wdw_)});
  c->impl_ =
      std::string(fpd.impl_info_str()) + "/" + dpd.impl_info_str() + "/" + wpd.impl_info_str();
  return c;
}

OnednnConv::Operand OnednnConv::Input(const memory::desc& plain, const memory::desc& inner) const {
  Operand op{plain, inner, {}};
  if (!op.same())
    op.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, plain, engine_, inner));
  return op;
}

OnednnConv::Operand OnednnConv::Output(const memory::desc& plain, const memory::desc& inner) const {
  Operand op{plain, inner, {}};
  if (!op.same())
    op.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, inner, engine_, plain));
  return op;
}

// The operand in the primitive's layout: the caller's buffer itself, or a blocked copy of it.
memory OnednnConv::In(dnnl::stream& stream, Arena& arena, const Operand& op, const float* p) const {
  memory user(op.plain, engine_, const_cast<float*>(p));
  if (op.same()) return user;
  memory inner(op.inner, engine_, arena.Take(op.inner));
  op.reorder.execute(stream, user, inner);
  return inner;
}

// Where the primitive writes an output: the caller's buffer, or a blocked buffer that Back()
// reorders into it.
memory OnednnConv::Out(Arena& arena, const Operand& op, float* p) const {
  if (op.same()) return memory(op.plain, engine_, p);
  return memory(op.inner, engine_, arena.Take(op.inner));
}

void OnednnConv::Back(dnnl::stream& stream, const Operand& op, const memory& m, float* p) const {
  if (op.same()) return;
  memory user(op.plain, engine_, p);
  op.reorder.execute(stream, const_cast<memory&>(m), user);
}

void OnednnConv::Forward(dnnl::stream& stream, float* arena, const float* x, const float* w,
                         float* y) const {
  OneThreadScope one_thread;
  Arena a(arena);
  memory scratch(forward_scratch_, engine_, a.Take(forward_scratch_));
  memory mx = In(stream, a, fx_, x), mw = In(stream, a, fw_, w), my = Out(a, fy_, y);
  forward_.execute(stream, {{DNNL_ARG_SRC, mx},
                            {DNNL_ARG_WEIGHTS, mw},
                            {DNNL_ARG_DST, my},
                            {DNNL_ARG_SCRATCHPAD, scratch}});
  Back(stream, fy_, my, y);
  stream.wait();
}

void OnednnConv::BackwardData(dnnl::stream& stream, float* arena, const float* dy, const float* w,
                              float* dx) const {
  OneThreadScope one_thread;
  Arena a(arena);
  memory scratch(data_scratch_, engine_, a.Take(data_scratch_));
  memory mdy = In(stream, a, ddy_, dy), mw = In(stream, a, dw_, w), mdx = Out(a, ddx_, dx);
  backward_data_.execute(stream, {{DNNL_ARG_DIFF_DST, mdy},
                                  {DNNL_ARG_WEIGHTS, mw},
                                  {DNNL_ARG_DIFF_SRC, mdx},
                                  {DNNL_ARG_SCRATCHPAD, scratch}});
  Back(stream, ddx_, mdx, dx);
  stream.wait();
}

void OnednnConv::BackwardFilter(dnnl::stream& stream, float* arena, const float* x, const float* dy,
                                float* dw) const {
  OneThreadScope one_thread;
  Arena a(arena);
  memory scratch(weights_scratch_, engine_, a.Take(weights_scratch_));
  memory mx = In(stream, a, wx_, x), mdy = In(stream, a, wdy_, dy), mdw = Out(a, wdw_, dw);
  backward_weights_.execute(stream, {{DNNL_ARG_SRC, mx},
                                     {DNNL_ARG_DIFF_DST, mdy},
                                     {DNNL_ARG_DIFF_WEIGHTS, mdw},
                                     {DNNL_ARG_SCRATCHPAD, scratch}});
  Back(stream, wdw_, mdw, dw);
  stream.wait();
}

}  // namespace towerps::kernels::cpu
