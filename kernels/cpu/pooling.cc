// Max and average pooling on the CPU (kernels/cpu/pooling.h): direct loops, (image, channel)
// planes split over the pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "kernels/cpu/pooling.h"

namespace towerps::kernels::cpu {
namespace {

// The in-range window of output (oy, ox): rows [y0, y1), columns [x0, x1).
struct Window {
  int y0, y1, x0, x1;
};

inline Window WindowOf(const Pool2dShape& s, int oy, int ox) {
  const int ys = oy * s.stride_h - s.pad_h, xs = ox * s.stride_w - s.pad_w;
  return {std::max(ys, 0), std::min(ys + s.window_h, s.h), std::max(xs, 0),
          std::min(xs + s.window_w, s.w)};
}

// Index within the plane of the first maximum of window `win`.
inline int ArgMax(const Pool2dShape& s, const float* plane, const Window& win) {
  int best = win.y0 * s.w + win.x0;
  float best_v = plane[best];
  for (int iy = win.y0; iy < win.y1; ++iy)
    for (int ix = win.x0; ix < win.x1; ++ix) {
      const float v = plane[iy * s.w + ix];
      if (v > best_v) {
        best_v = v;
        best = iy * s.w + ix;
      }
    }
  return best;
}

// Non-overlapping windows inside the image (window == stride, no padding, no window past the
// edge): every input belongs to at
// most one window, so backward can write dx densely instead of zeroing and scattering.
inline bool IsTiled(const Pool2dShape& s) {
  return s.stride_h == s.window_h && s.stride_w == s.window_w && s.pad_h == 0 && s.pad_w == 0 &&
         s.out_h * s.window_h <= s.h && s.out_w * s.window_w <= s.w;
}

void TiledMaxForward(const Pool2dShape& s, const float* plane, float* out) {
  const int wh = s.window_h, ww = s.window_w;
  for (int oy = 0; oy < s.out_h; ++oy) {
    const float* r0 = plane + int64_t{oy} * wh * s.w;
    float* o = out + int64_t{oy} * s.out_w;
    if (wh == 2 && ww == 2) {
      const float* r1 = r0 + s.w;
      for (int ox = 0; ox < s.out_w; ++ox) {
        const float a = std::max(r0[2 * ox], r0[2 * ox + 1]);
        const float b = std::max(r1[2 * ox], r1[2 * ox + 1]);
        o[ox] = std::max(a, b);
      }
      continue;
    }
    for (int ox = 0; ox < s.out_w; ++ox) {
      float best = r0[ox * ww];
      for (int i = 0; i < wh; ++i)
        for (int j = 0; j < ww; ++j) best = std::max(best, r0[i * s.w + ox * ww + j]);
      o[ox] = best;
    }
  }
}

// One output row of 2x2/2 max-pool backward: x0 and x1 are the two input rows (stride w), g the
// output-row gradient, d0 and d1 the two gradient rows (written for columns < 2 * out_w). The
// first maximum of each window in row-major order (a, b / c, d) gets the gradient; this is the
// reference's rule, computed branch-free, four windows at a time with SSE2.
void MaxBackward2x2Row(const float* x0, int w, const float* g, int out_w, float* d0) {
  const float* x1 = x0 + w;
  float* d1 = d0 + w;
  int ox = 0;
#if defined(__SSE2__)
  const __m128 ones = _mm_castsi128_ps(_mm_set1_epi32(-1));
  for (; ox + 4 <= out_w; ox += 4) {
    const __m128 lo0 = _mm_loadu_ps(x0 + 2 * ox), hi0 = _mm_loadu_ps(x0 + 2 * ox + 4);
    const __m128 lo1 = _mm_loadu_ps(x1 + 2 * ox), hi1 = _mm_loadu_ps(x1 + 2 * ox + 4);
    const __m128 a = _mm_shuffle_ps(lo0, hi0, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 b = _mm_shuffle_ps(lo0, hi0, _MM_SHUFFLE(3, 1, 3, 1));
    const __m128 c = _mm_shuffle_ps(lo1, hi1, _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 d = _mm_shuffle_ps(lo1, hi1, _MM_SHUFFLE(3, 1, 3, 1));
    const __m128 m = _mm_max_ps(_mm_max_ps(a, b), _mm_max_ps(c, d));
    const __m128 ma = _mm_cmpeq_ps(a, m);
    const __m128 mb = _mm_andnot_ps(ma, _mm_cmpeq_ps(b, m));
    const __m128 ab = _mm_or_ps(ma, mb);
    const __m128 mc = _mm_andnot_ps(ab, _mm_cmpeq_ps(c, m));
    const __m128 md = _mm_andnot_ps(_mm_or_ps(ab, mc), ones);
    const __m128 gv = _mm_loadu_ps(g + ox);
    const __m128 ga = _mm_and_ps(ma, gv), gb = _mm_and_ps(mb, gv);
    const __m128 gc = _mm_and_ps(mc, gv), gd = _mm_and_ps(md, gv);
    _mm_storeu_ps(d0 + 2 * ox, _mm_unpacklo_ps(ga, gb));
    _mm_storeu_ps(d0 + 2 * ox + 4, _mm_unpackhi_ps(ga, gb));
    _mm_storeu_ps(d1 + 2 * ox, _mm_unpacklo_ps(gc, gd));
    _mm_storeu_ps(d1 + 2 * ox + 4, _mm_unpackhi_ps(gc, gd));
  }
#endif
  for (; ox < out_w; ++ox) {
    const float a = x0[2 * ox], b = x0[2 * ox + 1], c = x1[2 * ox], d = x1[2 * ox + 1];
    const float m = std::max(std::max(a, b), std::max(c, d));
    const bool pa = a == m, pb = !pa && b == m, pc = !pa && !pb && c == m;
    d0[2 * ox] = pa ? g[ox] : 0.0f;
    d0[2 * ox + 1] = pb ? g[ox] : 0.0f;
    d1[2 * ox] = pc ? g[ox] : 0.0f;
    d1[2 * ox + 1] = !pa && !pb && !pc ? g[ox] : 0.0f;
  }
}

void TiledMaxBackward(const Pool2dShape& s, const float* plane, const float* g, float* grad) {
  const int wh = s.window_h, ww = s.window_w;
  const int covered_h = s.out_h * wh, covered_w = s.out_w * ww;
  for (int oy = 0; oy < s.out_h; ++oy) {
    for (int i = 0; i < wh; ++i) {
      float* row = grad + (int64_t{oy} * wh + i) * s.w;
      if (wh != 2 || ww != 2) {  // the 2x2 path below writes every covered element itself
        for (int x = 0; x < covered_w; ++x) row[x] = 0.0f;
      }
      for (int x = covered_w; x < s.w; ++x) row[x] = 0.0f;
    }
    if (wh == 2 && ww == 2) {
      MaxBackward2x2Row(plane + int64_t{oy} * 2 * s.w, s.w, g + int64_t{oy} * s.out_w, s.out_w,
                        grad + int64_t{oy} * 2 * s.w);
      continue;
    }
    for (int ox = 0; ox < s.out_w; ++ox) {
      // First maximum in row-major window order, as the reference.
      int best = oy * wh * s.w + ox * ww;
      for (int i = 0; i < wh; ++i)
        for (int j = 0; j < ww; ++j) {
          const int at = (oy * wh + i) * s.w + ox * ww + j;
          if (plane[at] > plane[best]) best = at;
        }
      grad[best] = g[oy * s.out_w + ox];
    }
  }
  std::memset(grad + int64_t{covered_h} * s.w, 0,
              sizeof(float) * static_cast<size_t>(s.h - covered_h) * s.w);
}

}  // namespace

void MaxPoolForward(CpuContext& ctx, const Pool2dShape& s, const float* x, float* y) {
  const int64_t in_plane = int64_t{s.h} * s.w, out_plane = int64_t{s.out_h} * s.out_w;
  ctx.pool().ParallelFor(int64_t{s.n} * s.c, 4, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = x + p * in_plane;
      float* out = y + p * out_plane;
      if (IsTiled(s)) {
        TiledMaxForward(s, plane, out);
        continue;
      }
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          out[oy * s.out_w + ox] = plane[ArgMax(s, plane, WindowOf(s, oy, ox))];
        }
    }
  });
}

void MaxPoolBackward(CpuContext& ctx, const Pool2dShape& s, const float* x, const float* dy,
                     float* dx) {
  const int64_t in_plane = int64_t{s.h} * s.w, out_plane = int64_t{s.out_h} * s.out_w;
  ctx.pool().ParallelFor(int64_t{s.n} * s.c, 4, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = x + p * in_plane;
      float* grad = dx + p * in_plane;
      const float* g = dy + p * out_plane;
      if (IsTiled(s)) {
        TiledMaxBackward(s, plane, g, grad);
        continue;
      }
      std::memset(grad, 0, sizeof(float) * static_cast<size_t>(in_plane));
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          grad[ArgMax(s, plane, WindowOf(s, oy, ox))] += g[oy * s.out_w + ox];
        }
    }
  });
}

void AvgPoolForward(CpuContext& ctx, const Pool2dShape& s, const float* x, float* y) {
  const int64_t in_plane = int64_t{s.h} * s.w, out_plane = int64_t{s.out_h} * s.out_w;
  ctx.pool().ParallelFor(int64_t{s.n} * s.c, 4, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = x + p * in_plane;
      float* out = y + p * out_plane;
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          const Window win = WindowOf(s, oy, ox);
          float sum = 0.0f;
          for (int iy = win.y0; iy < win.y1; ++iy)
            for (int ix = win.x0; ix < win.x1; ++ix) sum += plane[iy * s.w + ix];
          out[oy * s.out_w + ox] = sum / static_cast<float>((win.y1 - win.y0) * (win.x1 - win.x0));
        }
    }
  });
}

void AvgPoolBackward(CpuContext& ctx, const Pool2dShape& s, const float* dy, float* dx) {
  const int64_t in_plane = int64_t{s.h} * s.w, out_plane = int64_t{s.out_h} * s.out_w;
  ctx.pool().ParallelFor(int64_t{s.n} * s.c, 4, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      float* grad = dx + p * in_plane;
      const float* g = dy + p * out_plane;
      std::memset(grad, 0, sizeof(float) * static_cast<size_t>(in_plane));
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          const Window win = WindowOf(s, oy, ox);
          const float share =
              g[oy * s.out_w + ox] / static_cast<float>((win.y1 - win.y0) * (win.x1 - win.x0));
          for (int iy = win.y0; iy < win.y1; ++iy)
            for (int ix = win.x0; ix < win.x1; ++ix) grad[iy * s.w + ix] += share;
        }
    }
  });
}

}  // namespace towerps::kernels::cpu
