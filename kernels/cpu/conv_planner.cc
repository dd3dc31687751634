// ConvPlanner (kernels/cpu/conv_planner.h): which path runs each convolution shape, and the
// oneDNN pieces of a batch.
#include "kernels/cpu/conv_planner.h"

#include <cstring>
#include <vector>

#if TOWERPS_WITH_ONEDNN
#include "kernels/cpu/onednn_conv.h"
#endif

namespace towerps::kernels::cpu {
namespace {

constexpr const char* kIm2colName = "im2col+sgemm";

}  // namespace

#if TOWERPS_WITH_ONEDNN

namespace {

// The measured rule: `towerps-bench train --profile --cpu-conv im2col|onednn` on this 2-core
// AMD EPYC (AVX-512), one thread, 2026-11-29; forward / backward ms per batch, oneDNN against
// im2col (docs/PERFORMANCE.md, "Convolutions layer by layer"):
//  - 3x3 over 16-64 channels (ResNet-20's blocks, batch 128): oneDNN 1.5-2x faster, e.g.
//    10.5 / 17.2 against 18.2 / 39.9 at 16 channels, 32x32;
//  - 3x3 over 32 channels (the cnn's conv2, batch 64): 3.0 / 6.3 against 4.2 / 9.0;
//  - 5x5 over 3 and 64 channels (cifar10, batch 64): 4.6 / 4.5 against 5.1 / 6.6, and
//    14.2 / 29.6 against 27.6 / 56.5;
//  - 3x3 over 3 channels (ResNet-20's stem): even, 2.9 / 2.0 against 2.1 / 2.2;
//  - 3x3 over 1 channel (the cnn's conv1): 0.60 / 0.55 against 0.44 / 0.47;
//  - 1x1 stride 2 (ResNet-20's projections): 1.21 / 3.29 against 0.57 / 1.53 at 32 channels,
//    even at 16.
// So: oneDNN where each output sums at least 48 inputs (c·r·s, the im2col GEMM's inner
// dimension) through a kernel larger than 1x1; im2col for the thin and the pointwise.
bool OnednnWins(const Conv2dShape& s) { return s.r * s.s > 1 && s.c * s.r * s.s >= 48; }

// The images [begin, end) of piece p of `pieces`.
int PieceBegin(int n, int p, int pieces) { return static_cast<int>(int64_t{n} * p / pieces); }

}  // namespace

struct ConvPlanner::Onednn {
  explicit Onednn(int threads) : engine(dnnl::engine::kind::cpu, 0) {
    for (int t = 0; t < threads; ++t) streams.emplace_back(engine);
  }
  dnnl::engine engine;
  std::vector<dnnl::stream> streams;  // one per pool thread
};

struct ConvPlanner::Plan {
  std::string describe;
  // The primitives of each piece size (n / threads and one more), empty for im2col.
  std::map<int, std::unique_ptr<OnednnConv>> by_images;
};

bool ConvPlanner::Available() { return true; }

ConvPlanner::ConvPlanner(ConvAlgorithm algorithm, int threads)
    : algorithm_(algorithm),
      threads_(threads),
      onednn_(algorithm == ConvAlgorithm::kIm2col ? nullptr : std::make_unique<Onednn>(threads)) {}

ConvPlanner::Plan& ConvPlanner::PlanFor(const Conv2dShape& s) {
  const Key key{s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  plan->describe = kIm2colName;
  if (onednn_ && (algorithm_ == ConvAlgorithm::kOnednn || OnednnWins(s))) {
    try {
      for (int p = 0; p < threads_; ++p) {
        const int images = PieceBegin(s.n, p + 1, threads_) - PieceBegin(s.n, p, threads_);
        if (images == 0 || plan->by_images.count(images) != 0) continue;
        Conv2dShape piece = s;
        piece.n = images;
        plan->by_images[images] = OnednnConv::Create(onednn_->engine, piece);
      }
      if (!plan->by_images.empty()) {
        plan->describe = "onednn " + plan->by_images.rbegin()->second->impl();
      }
    } catch (const dnnl::error& e) {
      plan->by_images.clear();
      plan->describe = std::string(kIm2colName) + " (oneDNN refused the shape: " + e.what() + ")";
    }
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

namespace {

// Runs fn(piece, begin, end, conv, stream, arena) for each non-empty piece of the batch, one
// piece per pool thread.
template <typename Fn>
void RunPieces(CpuContext& ctx, std::vector<dnnl::stream>& streams,
               const std::map<int, std::unique_ptr<OnednnConv>>& by_images, int n, const Fn& fn) {
  const int pieces = ctx.threads();
  ctx.pool().ParallelFor(pieces, 1, [&](int thread, int64_t p0, int64_t p1) {
    for (int p = static_cast<int>(p0); p < p1; ++p) {
      const int begin = PieceBegin(n, p, pieces), end = PieceBegin(n, p + 1, pieces);
      if (begin == end) continue;
      const OnednnConv& conv = *by_images.at(end - begin);
      fn(p, begin, end, conv, streams[static_cast<size_t>(thread)],
         ctx.Scratch(thread, conv.arena_floats()));
    }
  });
}

}  // namespace

bool ConvPlanner::Forward(CpuContext& ctx, const Conv2dShape& s, const float* x, const float* w,
                          float* y) {
  const int64_t xi = s.x_size() / s.n, yi = s.y_size() / s.n;
  const auto& by_images = PlanFor(s).by_images;
  if (by_images.empty()) return false;  // im2col's
  RunPieces(ctx, onednn_->streams, by_images, s.n,
            [&](int, int b, int, const OnednnConv& conv, dnnl::stream& st, float* arena) {
              conv.Forward(st, arena, x + b * xi, w, y + b * yi);
            });
  return true;
}

bool ConvPlanner::BackwardData(CpuContext& ctx, const Conv2dShape& s, const float* dy,
                               const float* w, float* dx) {
  const int64_t xi = s.x_size() / s.n, yi = s.y_size() / s.n;
  const auto& by_images = PlanFor(s).by_images;
  if (by_images.empty()) return false;  // im2col's
  RunPieces(ctx, onednn_->streams, by_images, s.n,
            [&](int, int b, int, const OnednnConv& conv, dnnl::stream& st, float* arena) {
              conv.BackwardData(st, arena, dy + b * yi, w, dx + b * xi);
            });
  return true;
}

bool ConvPlanner::BackwardFilter(CpuContext& ctx, const Conv2dShape& s, const float* x,
                                 const float* dy, float* dw) {
  const auto& by_images = PlanFor(s).by_images;
  if (by_images.empty()) return false;  // im2col's
  const int64_t xi = s.x_size() / s.n, yi = s.y_size() / s.n;
  const size_t w_size = static_cast<size_t>(s.w_size());
  auto& partials = ctx.partial_dw();
  if (partials.size() < static_cast<size_t>(threads_)) partials.resize(threads_);
  for (auto& partial : partials) {
    if (partial.size() < w_size) partial.resize(w_size);
  }
  // A single piece writes dw itself; otherwise each piece its partial, added in piece order.
  const bool one_piece = threads_ == 1 || s.n < 2;
  RunPieces(ctx, onednn_->streams, by_images, s.n,
            [&](int p, int b, int, const OnednnConv& conv, dnnl::stream& st, float* arena) {
              float* out = one_piece ? dw : partials[static_cast<size_t>(p)].data();
              conv.BackwardFilter(st, arena, x + b * xi, dy + b * yi, out);
            });
  if (one_piece) return true;
  bool first = true;
  for (int p = 0; p < threads_; ++p) {
    if (PieceBegin(s.n, p, threads_) == PieceBegin(s.n, p + 1, threads_)) continue;
    const float* partial = partials[static_cast<size_t>(p)].data();
    if (first) {
      std::memcpy(dw, partial, sizeof(float) * w_size);
      first = false;
    } else {
      for (size_t i = 0; i < w_size; ++i) dw[i] += partial[i];
    }
  }
  return true;
}

#else  // without oneDNN: im2col everywhere

struct ConvPlanner::Onednn {};
struct ConvPlanner::Plan {
  std::string describe = kIm2colName;
};

bool ConvPlanner::Available() { return false; }

ConvPlanner::ConvPlanner(ConvAlgorithm algorithm, int threads)
    : algorithm_(algorithm), threads_(threads) {}

ConvPlanner::Plan& ConvPlanner::PlanFor(const Conv2dShape& s) {
  const Key key{s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride_h, s.stride_w, s.pad_h, s.pad_w};
  auto& plan = plans_[key];
  if (!plan) plan = std::make_unique<Plan>();
  return *plan;
}

bool ConvPlanner::Forward(CpuContext&, const Conv2dShape&, const float*, const float*, float*) {
  return false;
}
bool ConvPlanner::BackwardData(CpuContext&, const Conv2dShape&, const float*, const float*,
                               float*) {
  return false;
}
bool ConvPlanner::BackwardFilter(CpuContext&, const Conv2dShape&, const float*, const float*,
                                 float*) {
  return false;
}

#endif  // TOWERPS_WITH_ONEDNN

ConvPlanner::~ConvPlanner() = default;

const std::string& ConvPlanner::Describe(const Conv2dShape& s) { return PlanFor(s).describe; }

}  // namespace towerps::kernels::cpu
