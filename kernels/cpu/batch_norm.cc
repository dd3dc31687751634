// Batch normalization, global average pooling and the residual add on the CPU
// (kernels/cpu/batch_norm.h), as kernels/cuda/batch_norm.cu groups them. Batch norm works a
// channel per piece of the thread pool, summing in double in a fixed order, so the results do
// not depend on the thread count.
#include <cmath>

#include "kernels/cpu/batch_norm.h"

namespace towerps::kernels::cpu {

void BatchNormForwardTraining(CpuContext& ctx, int n, int c, int hw, float epsilon, const float* x,
                              const float* gamma, const float* beta, float* y, float* mean,
                              float* var, float* inv_std) {
  const double m = double{1} * n * hw;
  ctx.pool().ParallelFor(c, 1, [&](int, int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      double sum = 0;
      for (int b = 0; b < n; ++b) {
        const float* xp = x + (b * int64_t{c} + ch) * hw;
        for (int i = 0; i < hw; ++i) sum += xp[i];
      }
      const double mu = sum / m;
      double sq = 0;
      for (int b = 0; b < n; ++b) {
        const float* xp = x + (b * int64_t{c} + ch) * hw;
        for (int i = 0; i < hw; ++i) sq += (xp[i] - mu) * (xp[i] - mu);
      }
      const double is = 1.0 / std::sqrt(sq / m + epsilon);
      mean[ch] = static_cast<float>(mu);
      var[ch] = static_cast<float>(sq / m);
      inv_std[ch] = static_cast<float>(is);
      // y = scale * x + shift, with the statistics as written out (backward reads those).
      const float scale = gamma[ch] * inv_std[ch];
      const float shift = beta[ch] - scale * mean[ch];
      for (int b = 0; b < n; ++b) {
        const int64_t at = (b * int64_t{c} + ch) * hw;
        for (int i = 0; i < hw; ++i) y[at + i] = scale * x[at + i] + shift;
      }
    }
  });
}

void BatchNormForwardInference(CpuContext& ctx, int n, int c, int hw, float epsilon, const float* x,
                               const float* gamma, const float* beta, const float* mean,
                               const float* var, float* y) {
  ctx.pool().ParallelFor(int64_t{n} * c, 1, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ch = p % c;
      const float scale = gamma[ch] / std::sqrt(var[ch] + epsilon);
      const float shift = beta[ch] - scale * mean[ch];
      for (int i = 0; i < hw; ++i) y[p * hw + i] = scale * x[p * hw + i] + shift;
    }
  });
}

void BatchNormBackward(CpuContext& ctx, int n, int c, int hw, const float* x, const float* dy,
                       const float* gamma, const float* mean, const float* inv_std, float* dx,
                       float* dgamma, float* dbeta) {
  const double m = double{1} * n * hw;
  ctx.pool().ParallelFor(c, 1, [&](int, int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      const double mu = mean[ch], is = inv_std[ch];
      double sum_dy = 0, sum_dy_xhat = 0;
      for (int b = 0; b < n; ++b) {
        const int64_t at = (b * int64_t{c} + ch) * hw;
        for (int i = 0; i < hw; ++i) {
          sum_dy += dy[at + i];
          sum_dy_xhat += dy[at + i] * ((x[at + i] - mu) * is);
        }
      }
      // dx = k * (m * dy - sum_dy - xhat * sum_dy_xhat), in float after the sums.
      const float k = static_cast<float>(gamma[ch] * is / m);
      const float fm = static_cast<float>(m), fsum = static_cast<float>(sum_dy),
                  fsum_xhat = static_cast<float>(sum_dy_xhat);
      const float fmu = mean[ch], fis = inv_std[ch];
      for (int b = 0; b < n; ++b) {
        const int64_t at = (b * int64_t{c} + ch) * hw;
        for (int i = 0; i < hw; ++i) {
          const float xhat = (x[at + i] - fmu) * fis;
          dx[at + i] = k * (fm * dy[at + i] - fsum - xhat * fsum_xhat);
        }
      }
      dgamma[ch] = fsum_xhat;
      dbeta[ch] = fsum;
    }
  });
}

void GlobalAvgPoolForward(CpuContext& ctx, int n, int c, int hw, const float* x, float* y) {
  ctx.pool().ParallelFor(int64_t{n} * c, 64, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      double sum = 0;
      for (int i = 0; i < hw; ++i) sum += x[p * hw + i];
      y[p] = static_cast<float>(sum / hw);
    }
  });
}

void GlobalAvgPoolBackward(CpuContext& ctx, int n, int c, int hw, const float* dy, float* dx) {
  ctx.pool().ParallelFor(int64_t{n} * c, 64, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float g = dy[p] / static_cast<float>(hw);
      for (int i = 0; i < hw; ++i) dx[p * hw + i] = g;
    }
  });
}

void Add(CpuContext& ctx, int64_t n, const float* a, const float* b, float* y) {
  ctx.ForEachRange(n, [=](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) y[i] = a[i] + b[i];
  });
}

}  // namespace towerps::kernels::cpu
