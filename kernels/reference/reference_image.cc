// Reference convolution, pooling and LRN: direct loops over the definitions.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference/reference_ops.h"

namespace towerps::kernels::reference {
namespace {

inline int64_t Idx4(int c_dim, int h_dim, int w_dim, int n, int c, int y, int x) {
  return ((int64_t{n} * c_dim + c) * h_dim + y) * w_dim + x;
}

// Calls tap(x_index, w_index, y_index) for every product x[x_index] * w[w_index] that
// convolution adds into y[y_index], in (n, k, oy, ox, c, i, j) order; taps in the padding are
// skipped. The three convolution ops are this one loop with a different accumulation.
template <typename Tap>
void ForEachConvTap(const Conv2dShape& s, Tap tap) {
  const int oh = s.out_h(), ow = s.out_w();
  for (int n = 0; n < s.n; ++n)
    for (int k = 0; k < s.k; ++k)
      for (int oy = 0; oy < oh; ++oy)
        for (int ox = 0; ox < ow; ++ox) {
          const int64_t yi = Idx4(s.k, oh, ow, n, k, oy, ox);
          for (int c = 0; c < s.c; ++c)
            for (int i = 0; i < s.r; ++i)
              for (int j = 0; j < s.s; ++j) {
                const int iy = oy * s.stride_h - s.pad_h + i;
                const int ix = ox * s.stride_w - s.pad_w + j;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                tap(Idx4(s.c, s.h, s.w, n, c, iy, ix), Idx4(s.c, s.r, s.s, k, c, i, j), yi);
              }
        }
}

}  // namespace

template <typename T>
void Conv2dForward(const Conv2dShape& s, const T* x, const T* w, T* y) {
  std::vector<double> acc(s.y_size(), 0.0);
  ForEachConvTap(
      s, [&](int64_t xi, int64_t wi, int64_t yi) { acc[yi] += double{x[xi]} * double{w[wi]}; });
  for (int64_t i = 0; i < s.y_size(); ++i) y[i] = static_cast<T>(acc[i]);
}

template <typename T>
void Conv2dBackwardData(const Conv2dShape& s, const T* dy, const T* w, T* dx) {
  std::vector<double> acc(s.x_size(), 0.0);
  ForEachConvTap(
      s, [&](int64_t xi, int64_t wi, int64_t yi) { acc[xi] += double{dy[yi]} * double{w[wi]}; });
  for (int64_t i = 0; i < s.x_size(); ++i) dx[i] = static_cast<T>(acc[i]);
}

template <typename T>
void Conv2dBackwardFilter(const Conv2dShape& s, const T* x, const T* dy, T* dw) {
  std::vector<double> acc(s.w_size(), 0.0);
  ForEachConvTap(
      s, [&](int64_t xi, int64_t wi, int64_t yi) { acc[wi] += double{dy[yi]} * double{x[xi]}; });
  for (int64_t i = 0; i < s.w_size(); ++i) dw[i] = static_cast<T>(acc[i]);
}

namespace {

// Calls f(input_index) for every in-range input position of output (n, c, oy, ox) in row-major
// window order, and returns how many there were.
template <typename F>
int ForEachInWindow(const Pool2dShape& s, int n, int c, int oy, int ox, F f) {
  int count = 0;
  for (int i = 0; i < s.window_h; ++i)
    for (int j = 0; j < s.window_w; ++j) {
      const int iy = oy * s.stride_h - s.pad_h + i;
      const int ix = ox * s.stride_w - s.pad_w + j;
      if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
      f(Idx4(s.c, s.h, s.w, n, c, iy, ix));
      ++count;
    }
  return count;
}

}  // namespace

template <typename T>
void MaxPoolForward(const Pool2dShape& s, const T* x, T* y) {
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          int64_t best = -1;
          ForEachInWindow(s, n, c, oy, ox, [&](int64_t i) {
            if (best < 0 || x[i] > x[best]) best = i;
          });
          y[Idx4(s.c, s.out_h, s.out_w, n, c, oy, ox)] = x[best];
        }
}

template <typename T>
void MaxPoolBackward(const Pool2dShape& s, const T* x, const T* dy, T* dx) {
  std::vector<double> acc(s.x_size(), 0.0);
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          int64_t best = -1;
          ForEachInWindow(s, n, c, oy, ox, [&](int64_t i) {
            if (best < 0 || x[i] > x[best]) best = i;
          });
          acc[best] += dy[Idx4(s.c, s.out_h, s.out_w, n, c, oy, ox)];
        }
  for (int64_t i = 0; i < s.x_size(); ++i) dx[i] = static_cast<T>(acc[i]);
}

template <typename T>
void AvgPoolForward(const Pool2dShape& s, const T* x, T* y) {
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          double sum = 0;
          const int count = ForEachInWindow(s, n, c, oy, ox, [&](int64_t i) { sum += x[i]; });
          y[Idx4(s.c, s.out_h, s.out_w, n, c, oy, ox)] = static_cast<T>(sum / count);
        }
}

template <typename T>
void AvgPoolBackward(const Pool2dShape& s, const T* dy, T* dx) {
  std::vector<double> acc(s.x_size(), 0.0);
  for (int n = 0; n < s.n; ++n)
    for (int c = 0; c < s.c; ++c)
      for (int oy = 0; oy < s.out_h; ++oy)
        for (int ox = 0; ox < s.out_w; ++ox) {
          const int count = ForEachInWindow(s, n, c, oy, ox, [](int64_t) {});
          const double g = double{dy[Idx4(s.c, s.out_h, s.out_w, n, c, oy, ox)]} / count;
          ForEachInWindow(s, n, c, oy, ox, [&](int64_t i) { acc[i] += g; });
        }
  for (int64_t i = 0; i < s.x_size(); ++i) dx[i] = static_cast<T>(acc[i]);
}

namespace {

// bias + alpha * sum of squares over the channel window of (n, d, i).
template <typename T>
double LrnScale(int c, int hw, const LrnParams& p, const T* x, int n, int d, int i) {
  double sum = 0;
  for (int e = std::max(0, d - p.depth_radius); e <= std::min(c - 1, d + p.depth_radius); ++e) {
    const double v = x[(int64_t{n} * c + e) * hw + i];
    sum += v * v;
  }
  return double{p.bias} + double{p.alpha} * sum;
}

}  // namespace

template <typename T>
void LrnForward(int n, int c, int hw, const LrnParams& p, const T* x, T* y) {
  for (int b = 0; b < n; ++b)
    for (int d = 0; d < c; ++d)
      for (int i = 0; i < hw; ++i) {
        const int64_t at = (int64_t{b} * c + d) * hw + i;
        y[at] = static_cast<T>(x[at] * std::pow(LrnScale(c, hw, p, x, b, d, i), -double{p.beta}));
      }
}

template <typename T>
void LrnBackward(int n, int c, int hw, const LrnParams& p, const T* x, const T* dy, T* dx) {
  // y_d = x_d s_d^-beta with s_d = bias + alpha sum_{e in W(d)} x_e^2, and e in W(d) iff
  // d in W(e), so dx_e = dy_e s_e^-beta - 2 alpha beta x_e sum_{d in W(e)} dy_d x_d s_d^(-beta-1).
  for (int b = 0; b < n; ++b)
    for (int e = 0; e < c; ++e)
      for (int i = 0; i < hw; ++i) {
        const int64_t at = (int64_t{b} * c + e) * hw + i;
        double g = dy[at] * std::pow(LrnScale(c, hw, p, x, b, e, i), -double{p.beta});
        for (int d = std::max(0, e - p.depth_radius); d <= std::min(c - 1, e + p.depth_radius);
             ++d) {
          const int64_t dat = (int64_t{b} * c + d) * hw + i;
          const double sd = LrnScale(c, hw, p, x, b, d, i);
          g -= 2.0 * p.alpha * p.beta * double{x[at]} * double{dy[dat]} * double{x[dat]} *
               std::pow(sd, -double{p.beta} - 1.0);
        }
        dx[at] = static_cast<T>(g);
      }
}

#define TOWERPS_INSTANTIATE(T)                                                       \
  template void Conv2dForward<T>(const Conv2dShape&, const T*, const T*, T*);        \
  template void Conv2dBackwardData<T>(const Conv2dShape&, const T*, const T*, T*);   \
  template void Conv2dBackwardFilter<T>(const Conv2dShape&, const T*, const T*, T*); \
  template void MaxPoolForward<T>(const Pool2dShape&, const T*, T*);                 \
  template void MaxPoolBackward<T>(const Pool2dShape&, const T*, const T*, T*);      \
  template void AvgPoolForward<T>(const Pool2dShape&, const T*, T*);                 \
  template void AvgPoolBackward<T>(const Pool2dShape&, const T*, T*);                \
  template void LrnForward<T>(int, int, int, const LrnParams&, const T*, T*);        \
  template void LrnBackward<T>(int, int, int, const LrnParams&, const T*, const T*, T*);
TOWERPS_INSTANTIATE(float)
TOWERPS_INSTANTIATE(double)
#undef TOWERPS_INSTANTIATE

}  // namespace towerps::kernels::reference
