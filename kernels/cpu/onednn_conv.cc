// OnednnConv (kernels/cpu/onednn_conv.h): oneDNN's direct convolution on one thread, with the
// reorders between TowerPS's plain layouts and oneDNN's blocked ones.
#include "kernels/cpu/onednn_conv.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <utility>

#include "towerps/check.h"

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

}  // namespace

// Hands out 64-byte-aligned pieces of the caller's arena, in order.
class OnednnConv::Arena {
 public:
  Arena(float* base, size_t floats) : end_(base + floats) {
    const auto a = reinterpret_cast<uintptr_t>(base);
    next_ = base + (kAlignFloats - (a / sizeof(float)) % kAlignFloats) % kAlignFloats;
  }
  float* Take(const memory::desc& d) {
    float* p = next_;
    next_ += Aligned(Floats(d));
    TOWERPS_CHECK(next_ <= end_) << "oneDNN arena overrun: arena_floats() undercounts";
    return p;
  }

 private:
  float* next_;
  float* const end_;
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
  c->forward_ = {dnnl::convolution_forward(fpd), fpd.scratchpad_desc(),
                 c->Input(DNNL_ARG_SRC, plain_x, fpd.src_desc()),
                 c->Input(DNNL_ARG_WEIGHTS, plain_w, fpd.weights_desc()),
                 c->Output(DNNL_ARG_DST, plain_y, fpd.dst_desc())};
  c->backward_data_ = {dnnl::convolution_backward_data(dpd), dpd.scratchpad_desc(),
                       c->Input(DNNL_ARG_DIFF_DST, plain_y, dpd.diff_dst_desc()),
                       c->Input(DNNL_ARG_WEIGHTS, plain_w, dpd.weights_desc()),
                       c->Output(DNNL_ARG_DIFF_SRC, plain_x, dpd.diff_src_desc())};
  c->backward_weights_ = {dnnl::convolution_backward_weights(wpd), wpd.scratchpad_desc(),
                          c->Input(DNNL_ARG_SRC, plain_x, wpd.src_desc()),
                          c->Input(DNNL_ARG_DIFF_DST, plain_y, wpd.diff_dst_desc()),
                          c->Output(DNNL_ARG_DIFF_WEIGHTS, plain_w, wpd.diff_weights_desc())};
  c->arena_floats_ = std::max({c->forward_.ArenaFloats(), c->backward_data_.ArenaFloats(),
                               c->backward_weights_.ArenaFloats()});
  c->impl_ =
      std::string(fpd.impl_info_str()) + "/" + dpd.impl_info_str() + "/" + wpd.impl_info_str();
  return c;
}

// The floats a pass needs beyond the caller's buffers: the blocked copies and the scratchpad.
size_t OnednnConv::Pass::ArenaFloats() const {
  size_t total = Aligned(Floats(scratch)) + kAlignFloats;  // and room to align the start
  for (const Operand* op : {&a, &b, &out}) {
    if (!op->same()) total += Aligned(Floats(op->inner)) + Aligned(Floats(op->scratch));
  }
  return total;
}

OnednnConv::Operand OnednnConv::Between(int arg, const memory::desc& from, const memory::desc& to,
                                        bool input) const {
  Operand op{arg, input ? from : to, input ? to : from, {}, {}};
  if (op.same()) return op;
  // The reorders run on every pool thread, so their scratchpad is ours too, as the
  // convolutions' is (oneDNN's own is set up for the thread that creates a primitive).
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const dnnl::reorder::primitive_desc pd(engine_, from, engine_, to, attr);
  op.reorder = dnnl::reorder(pd);
  op.scratch = pd.scratchpad_desc();
  return op;
}

void OnednnConv::Reorder(const Operand& op, dnnl::stream& stream, Arena& space, memory& from,
                         memory& to) const {
  memory scratch(op.scratch, engine_, space.Take(op.scratch));
  op.reorder.execute(stream,
                     {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}});
}

// Inputs go in as the caller's buffers or as blocked copies of them; the output is written to the
// caller's buffer, or to a blocked one that is reordered into it afterwards.
void OnednnConv::Run(const Pass& pass, dnnl::stream& stream, float* arena, const float* a,
                     const float* b, float* out) const {
  OneThreadScope one_thread;
  Arena space(arena, arena_floats_);
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(pass.scratch, engine_, space.Take(pass.scratch)));
  for (auto [op, p] : {std::pair{&pass.a, a}, std::pair{&pass.b, b}}) {
    memory user(op->plain, engine_, const_cast<float*>(p));
    if (op->same()) {
      args.emplace(op->arg, user);
      continue;
    }
    memory inner(op->inner, engine_, space.Take(op->inner));
    Reorder(*op, stream, space, user, inner);
    args.emplace(op->arg, inner);
  }
  memory user_out(pass.out.plain, engine_, out);
  memory inner_out =
      pass.out.same() ? user_out : memory(pass.out.inner, engine_, space.Take(pass.out.inner));
  args.emplace(pass.out.arg, inner_out);
  pass.primitive.execute(stream, args);
  if (!pass.out.same()) Reorder(pass.out, stream, space, inner_out, user_out);
  stream.wait();
}

void OnednnConv::Forward(dnnl::stream& stream, float* arena, const float* x, const float* w,
                         float* y) const {
  Run(forward_, stream, arena, x, w, y);
}

void OnednnConv::BackwardData(dnnl::stream& stream, float* arena, const float* dy, const float* w,
                              float* dx) const {
  Run(backward_data_, stream, arena, dy, w, dx);
}

void OnednnConv::BackwardFilter(dnnl::stream& stream, float* arena, const float* x, const float* dy,
                                float* dw) const {
  Run(backward_weights_, stream, arena, x, dy, dw);
}

}  // namespace towerps::kernels::cpu
