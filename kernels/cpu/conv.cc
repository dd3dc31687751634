// Convolution on the CPU (kernels/cpu/conv.h): im2col + OpenBLAS sgemm, one image per GEMM, images
// split over the pool.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/cpu/conv.h"

namespace towerps::kernels::cpu {
namespace {

// col[(c * r + i) * s + j, oy * ow + ox] = x[c, oy * stride - pad + i, ox * stride - pad + j],
// zero outside the image. x is one image [c, h, w].
void Im2Col(const Conv2dShape& s, const float* x, float* col) {
  const int oh = s.out_h(), ow = s.out_w();
  for (int c = 0; c < s.c; ++c) {
    const float* plane = x + int64_t{c} * s.h * s.w;
    for (int i = 0; i < s.r; ++i) {
      for (int j = 0; j < s.s; ++j) {
        float* out = col + (int64_t{c} * s.r * s.s + i * s.s + j) * oh * ow;
        for (int oy = 0; oy < oh; ++oy) {
          const int iy = oy * s.stride_h - s.pad_h + i;
          float* row = out + int64_t{oy} * ow;
          if (iy < 0 || iy >= s.h) {
            std::memset(row, 0, sizeof(float) * static_cast<size_t>(ow));
            continue;
          }
          const float* in = plane + int64_t{iy} * s.w;
          if (s.stride_w == 1) {
            // ix = ox - pad + j is in range for ox in [lo, hi).
            const int lo = std::clamp(s.pad_w - j, 0, ow);
            const int hi = std::clamp(s.w + s.pad_w - j, lo, ow);
            for (int ox = 0; ox < lo; ++ox) row[ox] = 0.0f;
            std::memcpy(row + lo, in + lo - s.pad_w + j, sizeof(float) * (hi - lo));
            for (int ox = hi; ox < ow; ++ox) row[ox] = 0.0f;
          } else {
            for (int ox = 0; ox < ow; ++ox) {
              const int ix = ox * s.stride_w - s.pad_w + j;
              row[ox] = (ix >= 0 && ix < s.w) ? in[ix] : 0.0f;
            }
          }
        }
      }
    }
  }
}

// The adjoint of Im2Col: dx[c, iy, ix] = sum of the col entries that read it. dx is one image,
// overwritten.
void Col2Im(const Conv2dShape& s, const float* col, float* dx) {
  const int oh = s.out_h(), ow = s.out_w();
  std::memset(dx, 0, sizeof(float) * static_cast<size_t>(int64_t{s.c} * s.h * s.w));
  for (int c = 0; c < s.c; ++c) {
    float* plane = dx + int64_t{c} * s.h * s.w;
    for (int i = 0; i < s.r; ++i) {
      for (int j = 0; j < s.s; ++j) {
        const float* in = col + (int64_t{c} * s.r * s.s + i * s.s + j) * oh * ow;
        for (int oy = 0; oy < oh; ++oy) {
          const int iy = oy * s.stride_h - s.pad_h + i;
          if (iy < 0 || iy >= s.h) continue;
          float* out = plane + int64_t{iy} * s.w;
          const float* row = in + int64_t{oy} * ow;
          if (s.stride_w == 1) {
            const int lo = std::clamp(s.pad_w - j, 0, ow);
            const int hi = std::clamp(s.w + s.pad_w - j, lo, ow);
            float* o = out - s.pad_w + j;
            for (int ox = lo; ox < hi; ++ox) o[ox] += row[ox];
          } else {
            for (int ox = 0; ox < ow; ++ox) {
              const int ix = ox * s.stride_w - s.pad_w + j;
              if (ix >= 0 && ix < s.w) out[ix] += row[ox];
            }
          }
        }
      }
    }
  }
}

// The per-image GEMM sizes: output pixels, rows of the im2col matrix, and image strides.
struct ConvGemmDims {
  int ohw;          // out_h * out_w
  int crs;          // c * r * s
  int64_t x_image;  // floats per input image
  int64_t y_image;  // floats per output image
};

ConvGemmDims GemmDims(const Conv2dShape& s) {
  const int ohw = s.out_h() * s.out_w();
  return {ohw, s.c * s.r * s.s, int64_t{s.c} * s.h * s.w, int64_t{s.k} * ohw};
}

bool IsPointwise(const Conv2dShape& s) {
  return s.r == 1 && s.s == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
}

}  // namespace

void Conv2dForward(CpuContext& ctx, const Conv2dShape& s, const float* x, const float* w,
                   float* y) {
  const ConvGemmDims d = GemmDims(s);
  ctx.pool().ParallelFor(s.n, 1, [&](int thread, int64_t n0, int64_t n1) {
    float* col = IsPointwise(s) ? nullptr : ctx.Scratch(thread, static_cast<size_t>(d.crs) * d.ohw);
    for (int64_t n = n0; n < n1; ++n) {
      const float* b = x + n * d.x_image;
      if (col != nullptr) {
        Im2Col(s, b, col);
        b = col;
      }
      // y_n [k, ohw] = w [k, crs] * col [crs, ohw]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s.k, d.ohw, d.crs, 1.0f, w, d.crs, b,
                  d.ohw, 0.0f, y + n * d.y_image, d.ohw);
    }
  });
}

void Conv2dBackwardData(CpuContext& ctx, const Conv2dShape& s, const float* dy, const float* w,
                        float* dx) {
  const ConvGemmDims d = GemmDims(s);
  ctx.pool().ParallelFor(s.n, 1, [&](int thread, int64_t n0, int64_t n1) {
    float* col = IsPointwise(s) ? nullptr : ctx.Scratch(thread, static_cast<size_t>(d.crs) * d.ohw);
    for (int64_t n = n0; n < n1; ++n) {
      // col [crs, ohw] = w^T [crs, k] * dy_n [k, ohw]
      float* out = col != nullptr ? col : dx + n * d.x_image;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d.crs, d.ohw, s.k, 1.0f, w, d.crs,
                  dy + n * d.y_image, d.ohw, 0.0f, out, d.ohw);
      if (col != nullptr) Col2Im(s, col, dx + n * d.x_image);
    }
  });
}

void Conv2dBackwardFilter(CpuContext& ctx, const Conv2dShape& s, const float* x, const float* dy,
                          float* dw) {
  const ConvGemmDims d = GemmDims(s);
  const size_t w_size = static_cast<size_t>(s.w_size());
  // Each piece of images sums into its own partial, and the partials are added in image order.
  // Pieces are claimed by whichever thread is free, but their bounds depend only on n and the
  // pool's size, so the sum, and its bits, do not depend on the scheduling.
  const size_t max_pieces =
      static_cast<size_t>(ctx.pool().size()) * cpu::ThreadPool::kPiecesPerThread;
  if (ctx.partial_dw().size() < max_pieces) ctx.partial_dw().resize(max_pieces);
  for (auto& partial : ctx.partial_dw()) {
    if (partial.size() < w_size) partial.resize(w_size);
  }
  std::vector<int> slot_of_start(static_cast<size_t>(s.n), -1);
  std::atomic<int> slots{0};
  ctx.pool().ParallelFor(s.n, 1, [&](int thread, int64_t n0, int64_t n1) {
    float* col = IsPointwise(s) ? nullptr : ctx.Scratch(thread, static_cast<size_t>(d.crs) * d.ohw);
    const int slot = slots.fetch_add(1);
    slot_of_start[static_cast<size_t>(n0)] = slot;
    float* partial = ctx.partial_dw()[static_cast<size_t>(slot)].data();
    for (int64_t n = n0; n < n1; ++n) {
      const float* b = x + n * d.x_image;
      if (col != nullptr) {
        Im2Col(s, b, col);
        b = col;
      }
      // partial [k, crs] (+)= dy_n [k, ohw] * col^T [ohw, crs]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, s.k, d.crs, d.ohw, 1.0f,
                  dy + n * d.y_image, d.ohw, b, d.ohw, n == n0 ? 0.0f : 1.0f, partial, d.crs);
    }
  });
  bool first = true;
  for (int slot : slot_of_start) {
    if (slot < 0) continue;
    const float* partial = ctx.partial_dw()[static_cast<size_t>(slot)].data();
    if (first) {
      std::memcpy(dw, partial, sizeof(float) * w_size);
      first = false;
    } else {
      for (size_t i = 0; i < w_size; ++i) dw[i] += partial[i];
    }
  }
}

}  // namespace towerps::kernels::cpu
