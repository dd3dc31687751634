// Batch normalization, global average pooling and the residual add on the CPU
// (kernels/cpu/batch_norm.h), as kernels/cuda/batch_norm.cu groups them. Batch norm works a
// channel per piece of the thread pool, summing in double in a fixed order, so the results do
// not depend on the thread count.
#include <cmath>

#include "kernels/cpu/batch_norm.h"

namespace towerps::kernels::cpu {
namespace {

// Adds term(i) for i in [0, n) into eight double accumulators, lane i % 8: independent chains
// that the compiler vectorizes without -ffast-math (one chain would wait on each add's latency).
// The order is fixed, so the bits are too.
template <typename Term>
void Accumulate(int n, const Term& term, double acc[8]) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += term(i + j);
  }
  for (; i < n; ++i) acc[i % 8] += term(i);
}

double Total(const double acc[8]) {
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

void BatchNormForwardTraining(CpuContext& ctx, int n, int c, int hw, float epsilon, const float* x,
                              const float* gamma, const float* beta, float* y, float* mean,
                              float* var, float* inv_std) {
  const double m = double{1} * n * hw;
  ctx.pool().ParallelFor(c, 1, [&](int, int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      double sums[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int b = 0; b < n; ++b) {
        const float* xp = x + (b * int64_t{c} + ch) * hw;
        Accumulate(
            hw, [xp](int i) { return double{xp[i]}; }, sums);
      }
      const double mu = Total(sums) / m;
      double squares[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int b = 0; b < n; ++b) {
        const float* xp = x + (b * int64_t{c} + ch) * hw;
        Accumulate(
            hw,
            [xp, mu](int i) {
              const double d = xp[i] - mu;
              return d * d;
            },
            squares);
      }
      const double sq = Total(squares);
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
      double dys[8] = {0, 0, 0, 0, 0, 0, 0, 0}, dy_xhats[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int b = 0; b < n; ++b) {
        const float* xp = x + (b * int64_t{c} + ch) * hw;
        const float* dyp = dy + (b * int64_t{c} + ch) * hw;
        // Both sums in one pass over x and dy.
        int i = 0;
        for (; i + 8 <= hw; i += 8) {
          for (int j = 0; j < 8; ++j) {
            dys[j] += dyp[i + j];
            dy_xhats[j] += dyp[i + j] * ((xp[i + j] - mu) * is);
          }
        }
        for (; i < hw; ++i) {
          dys[i % 8] += dyp[i];
          dy_xhats[i % 8] += dyp[i] * ((xp[i] - mu) * is);
        }
      }
      const double sum_dy = Total(dys), sum_dy_xhat = Total(dy_xhats);
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
