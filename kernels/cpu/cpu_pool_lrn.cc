// CpuBackend pooling and local response normalization: direct loops, (image, channel) planes
// split over the pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/cpu_backend.h"

namespace towerps::kernels {
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

}  // namespace

void CpuBackend::MaxPoolForward(const Pool2dShape& s, const float* x, float* y) {
  const int64_t in_plane = int64_t{s.h} * s.w, out_plane = int64_t{s.out_h} * s.out_w;
  pool_.ParallelFor(int64_t{s.n} * s.c, 4, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = x + p * in_plane;
      float* out = y + p * out_plane;
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          out[oy * s.out_w + ox] = plane[ArgMax(s, plane, WindowOf(s, oy, ox))];
        }
    }
  });
}

void CpuBackend::MaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy, float* dx) {
  const int64_t in_plane = int64_t{s.h} * s.w, out_plane = int64_t{s.out_h} * s.out_w;
  pool_.ParallelFor(int64_t{s.n} * s.c, 4, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* plane = x + p * in_plane;
      float* grad = dx + p * in_plane;
      const float* g = dy + p * out_plane;
      std::memset(grad, 0, sizeof(float) * static_cast<size_t>(in_plane));
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          grad[ArgMax(s, plane, WindowOf(s, oy, ox))] += g[oy * s.out_w + ox];
        }
    }
  });
}

void CpuBackend::AvgPoolForward(const Pool2dShape& s, const float* x, float* y) {
  const int64_t in_plane = int64_t{s.h} * s.w, out_plane = int64_t{s.out_h} * s.out_w;
  pool_.ParallelFor(int64_t{s.n} * s.c, 4, [&](int, int64_t p0, int64_t p1) {
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

void CpuBackend::AvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx) {
  const int64_t in_plane = int64_t{s.h} * s.w, out_plane = int64_t{s.out_h} * s.out_w;
  pool_.ParallelFor(int64_t{s.n} * s.c, 4, [&](int, int64_t p0, int64_t p1) {
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

namespace {

// scale[d, i] = bias + alpha * sum over the channel window of x[e, i]^2, for one image [c, hw].
void LrnScale(int c, int hw, const LrnParams& p, const float* x, float* scale) {
  for (int d = 0; d < c; ++d) {
    float* out = scale + int64_t{d} * hw;
    for (int i = 0; i < hw; ++i) out[i] = 0.0f;
    for (int e = std::max(0, d - p.depth_radius); e <= std::min(c - 1, d + p.depth_radius); ++e) {
      const float* in = x + int64_t{e} * hw;
      for (int i = 0; i < hw; ++i) out[i] += in[i] * in[i];
    }
    for (int i = 0; i < hw; ++i) out[i] = p.bias + p.alpha * out[i];
  }
}

}  // namespace

void CpuBackend::LrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y) {
  const int64_t image = int64_t{c} * hw;
  pool_.ParallelFor(n, 1, [&](int chunk, int64_t b0, int64_t b1) {
    float* scale = Scratch(chunk, static_cast<size_t>(image));
    for (int64_t b = b0; b < b1; ++b) {
      const float* xi = x + b * image;
      float* yi = y + b * image;
      LrnScale(c, hw, p, xi, scale);
      for (int64_t i = 0; i < image; ++i) yi[i] = xi[i] * std::pow(scale[i], -p.beta);
    }
  });
}

void CpuBackend::LrnBackward(int n, int c, int hw, const LrnParams& p, const float* x,
                             const float* dy, float* dx) {
  // dx_e = dy_e s_e^-beta - 2 alpha beta x_e sum_{d in W(e)} dy_d x_d s_d^(-beta-1).
  const int64_t image = int64_t{c} * hw;
  pool_.ParallelFor(n, 1, [&](int chunk, int64_t b0, int64_t b1) {
    float* scale = Scratch(chunk, static_cast<size_t>(2 * image));
    float* t = scale + image;
    for (int64_t b = b0; b < b1; ++b) {
      const float* xi = x + b * image;
      const float* gi = dy + b * image;
      float* out = dx + b * image;
      LrnScale(c, hw, p, xi, scale);
      for (int64_t i = 0; i < image; ++i) {
        const float pw = std::pow(scale[i], -p.beta);
        out[i] = gi[i] * pw;
        t[i] = gi[i] * xi[i] * pw / scale[i];
      }
      const float k = 2.0f * p.alpha * p.beta;
      for (int e = 0; e < c; ++e) {
        float* o = out + int64_t{e} * hw;
        const float* xe = xi + int64_t{e} * hw;
        for (int d = std::max(0, e - p.depth_radius); d <= std::min(c - 1, e + p.depth_radius);
             ++d) {
          const float* td = t + int64_t{d} * hw;
          for (int i = 0; i < hw; ++i) o[i] -= k * xe[i] * td[i];
        }
      }
    }
  });
}

}  // namespace towerps::kernels
