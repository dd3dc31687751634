// Local response normalization on the CPU (kernels/cpu/lrn.h): direct loops, images split over
// the pool.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/lrn.h"

namespace towerps::kernels::cpu {
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

void LrnForward(CpuContext& ctx, int n, int c, int hw, const LrnParams& p, const float* x,
                float* y) {
  const int64_t image = int64_t{c} * hw;
  ctx.pool().ParallelFor(n, 1, [&](int chunk, int64_t b0, int64_t b1) {
    float* scale = ctx.Scratch(chunk, static_cast<size_t>(image));
    for (int64_t b = b0; b < b1; ++b) {
      const float* xi = x + b * image;
      float* yi = y + b * image;
      LrnScale(c, hw, p, xi, scale);
      for (int64_t i = 0; i < image; ++i) yi[i] = xi[i] * std::pow(scale[i], -p.beta);
    }
  });
}

void LrnBackward(CpuContext& ctx, int n, int c, int hw, const LrnParams& p, const float* x,
                 const float* dy, float* dx) {
  // dx_e = dy_e s_e^-beta - 2 alpha beta x_e sum_{d in W(e)} dy_d x_d s_d^(-beta-1).
  const int64_t image = int64_t{c} * hw;
  ctx.pool().ParallelFor(n, 1, [&](int chunk, int64_t b0, int64_t b1) {
    float* scale = ctx.Scratch(chunk, static_cast<size_t>(2 * image));
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

}  // namespace towerps::kernels::cpu
