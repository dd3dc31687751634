// CpuBackend: construction, dense algebra, activations, dropout, loss and elementwise ops, and
// the dispatch to the op families of kernels/cpu/ (cpu_backend.h lists them).
#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/batch_norm.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/interaction.h"
#include "kernels/cpu/lrn.h"
#include "kernels/cpu/pooling.h"

namespace towerps::kernels {
namespace {

constexpr int kMaxThreads = 256;
// Below this many multiply-adds a GEMM runs on one thread: splitting costs more than it saves.
constexpr int64_t kParallelGemmMacs = int64_t{1} << 17;

// Sum with eight independent accumulators, so that the loop vectorizes without -ffast-math.
float SumOf(const float* p, int n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += p[i];
  return sum;
}

}  // namespace

Result<std::unique_ptr<CpuBackend>> CpuBackend::Create(const CpuBackendOptions& options) {
  if (options.intra_op_threads < 1 || options.intra_op_threads > kMaxThreads) {
    return InvalidArgumentError("intra_op_threads " + std::to_string(options.intra_op_threads) +
                                " is out of range 1.." + std::to_string(kMaxThreads));
  }
  if (options.conv_algorithm == cpu::ConvAlgorithm::kOnednn && !cpu::ConvPlanner::Available()) {
    return InvalidArgumentError(
        "convolution algorithm 'onednn': this build has no oneDNN (built with TOWERPS_ONEDNN=OFF "
        "or without libdnnl-dev); use 'auto' or 'im2col', or rebuild with libdnnl-dev installed");
  }
  // We split work ourselves; a multi-threaded OpenBLAS would compete with our pool.
  openblas_set_num_threads(1);
  return std::unique_ptr<CpuBackend>(new CpuBackend(options));
}

void CpuBackend::Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a,
                      const float* b, float beta, float* c) {
  const int lda = trans_a ? m : k;
  const int ldb = trans_b ? k : n;
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // C = beta * C
    for (int64_t i = 0; i < int64_t{m} * n; ++i) c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  const int64_t macs = int64_t{m} * n * k;
  if (ctx_.pool().size() == 1 || macs < kParallelGemmMacs) {
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, n);
    return;
  }
  if (m >= n) {  // split the rows of C (and of op(A))
    // One piece per thread (at least 32 rows): narrower GEMMs lose more than balancing gains.
    ctx_.pool().ParallelFor(
        m, std::max<int64_t>(32, (m + ctx_.pool().size() - 1) / ctx_.pool().size()),
        [&](int, int64_t i0, int64_t i1) {
          const float* a_part = trans_a ? a + i0 : a + i0 * k;
          cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(i1 - i0), n, k, alpha, a_part, lda, b,
                      ldb, beta, c + i0 * n, n);
        });
  } else {  // split the columns of C (and of op(B))
    ctx_.pool().ParallelFor(
        n, std::max<int64_t>(64, (n + ctx_.pool().size() - 1) / ctx_.pool().size()),
        [&](int, int64_t j0, int64_t j1) {
          const float* b_part = trans_b ? b + j0 * k : b + j0;
          cblas_sgemm(CblasRowMajor, ta, tb, m, static_cast<int>(j1 - j0), k, alpha, a, lda, b_part,
                      ldb, beta, c + j0, n);
        });
  }
}

void CpuBackend::BiasAdd(int outer, int channels, int inner, const float* bias, float* y) {
  for (int o = 0; o < outer; ++o) {
    float* row = y + int64_t{o} * channels * inner;
    if (inner == 1) {
      for (int ch = 0; ch < channels; ++ch) row[ch] += bias[ch];
    } else {
      for (int ch = 0; ch < channels; ++ch) {
        float* p = row + int64_t{ch} * inner;
        const float bv = bias[ch];
        for (int i = 0; i < inner; ++i) p[i] += bv;
      }
    }
  }
}

void CpuBackend::BiasBackward(int outer, int channels, int inner, const float* dy, float* db) {
  std::fill(db, db + channels, 0.0f);
  for (int o = 0; o < outer; ++o) {
    const float* row = dy + int64_t{o} * channels * inner;
    if (inner == 1) {
      for (int ch = 0; ch < channels; ++ch) db[ch] += row[ch];
    } else {
      for (int ch = 0; ch < channels; ++ch) {
        db[ch] += SumOf(row + int64_t{ch} * inner, inner);
      }
    }
  }
}

void CpuBackend::ReluForward(int64_t n, const float* x, float* y) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = std::max(x[i], 0.0f);
  });
}

void CpuBackend::ReluBackward(int64_t n, const float* y, const float* dy, float* dx) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float g = dy[i];  // loaded unconditionally so that the loop vectorizes
      dx[i] = y[i] > 0.0f ? g : 0.0f;
    }
  });
}

void CpuBackend::TanhForward(int64_t n, const float* x, float* y) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = std::tanh(x[i]);
  });
}

void CpuBackend::TanhBackward(int64_t n, const float* y, const float* dy, float* dx) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
  });
}

void CpuBackend::SigmoidForward(int64_t n, const float* x, float* y) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
  });
}

void CpuBackend::SigmoidBackward(int64_t n, const float* y, const float* dy, float* dx) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
  });
}

void CpuBackend::DropoutForward(int64_t n, float rate, uint64_t seed, const float* x, float* mask,
                                float* y) {
  const float keep_scale = 1.0f / (1.0f - rate);
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float m = DropoutUniform(seed, static_cast<uint64_t>(i)) >= rate ? keep_scale : 0.0f;
      mask[i] = m;
      y[i] = x[i] * m;
    }
  });
}

void CpuBackend::DropoutBackward(int64_t n, const float* mask, const float* dy, float* dx) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * mask[i];
  });
}

void CpuBackend::SoftmaxCrossEntropy(int batch, int classes, const float* logits,
                                     const int32_t* labels, float grad_scale, float* loss,
                                     float* dlogits) {
  for (int b = 0; b < batch; ++b) {
    const float* l = logits + int64_t{b} * classes;
    const int label = labels[b];
    TOWERPS_CHECK(label >= 0 && label < classes) << "label " << label << " of example " << b;
    const float mx = *std::max_element(l, l + classes);
    float sum = 0.0f;
    for (int j = 0; j < classes; ++j) sum += std::exp(l[j] - mx);
    const float lse = mx + std::log(sum);
    const float target = l[label];
    loss[b] = lse - target;
    if (dlogits != nullptr) {
      float* d = dlogits + int64_t{b} * classes;
      for (int j = 0; j < classes; ++j) d[j] = std::exp(l[j] - lse) * grad_scale;
      d[label] -= grad_scale;
    }
  }
}

void CpuBackend::SigmoidCrossEntropy(int batch, const float* logits, const int32_t* labels,
                                     float grad_scale, float* loss, float* dlogits) {
  for (int b = 0; b < batch; ++b) {
    const int label = labels[b];
    TOWERPS_CHECK(label == 0 || label == 1) << "label " << label << " of example " << b;
    const float z = logits[b];
    loss[b] =
        std::max(z, 0.0f) - z * static_cast<float>(label) + std::log1p(std::exp(-std::abs(z)));
    if (dlogits != nullptr) {
      dlogits[b] = (1.0f / (1.0f + std::exp(-z)) - static_cast<float>(label)) * grad_scale;
    }
  }
}

void CpuBackend::SquaredError(int batch, int width, const float* outputs, const float* targets,
                              float grad_scale, float* loss, float* doutputs) {
  for (int b = 0; b < batch; ++b) {
    float sum = 0.0f;
    for (int j = 0; j < width; ++j) {
      const int64_t i = int64_t{b} * width + j;
      const float e = outputs[i] - targets[i];
      sum += e * e;
      if (doutputs != nullptr) doutputs[i] = 2.0f * e * grad_scale;
    }
    loss[b] = sum;
  }
}

void CpuBackend::Axpy(int64_t n, float alpha, const float* x, float* y) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) { cpu::Axpy(e - b, alpha, x + b, y + b); });
}

void CpuBackend::Scale(int64_t n, float alpha, float* y) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) { cpu::Scale(e - b, alpha, y + b); });
}

void CpuBackend::Fill(int64_t n, float value, float* y) { std::fill(y, y + n, value); }

void CpuBackend::AverageOf(int k, const float* const* in, int64_t n, float* out) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    std::vector<const float*> shifted(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) shifted[static_cast<size_t>(j)] = in[j] + b;
    cpu::AverageOf(k, shifted.data(), e - b, out + b);
  });
}

void CpuBackend::MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay,
                                const float* g, float* v, float* p) {
  ctx_.ForEachRange(n, [=](int64_t b, int64_t e) {
    cpu::MomentumUpdate(e - b, lr, momentum, weight_decay, g + b, v + b, p + b);
  });
}

void CpuBackend::Conv2dForward(const Conv2dShape& s, const float* x, const float* w, float* y) {
  if (!planner_.Forward(ctx_, s, x, w, y)) cpu::Conv2dForward(ctx_, s, x, w, y);
}

void CpuBackend::Conv2dBackwardData(const Conv2dShape& s, const float* dy, const float* w,
                                    float* dx) {
  if (!planner_.BackwardData(ctx_, s, dy, w, dx)) cpu::Conv2dBackwardData(ctx_, s, dy, w, dx);
}

void CpuBackend::Conv2dBackwardFilter(const Conv2dShape& s, const float* x, const float* dy,
                                      float* dw) {
  if (!planner_.BackwardFilter(ctx_, s, x, dy, dw)) cpu::Conv2dBackwardFilter(ctx_, s, x, dy, dw);
}

void CpuBackend::MaxPoolForward(const Pool2dShape& s, const float* x, float* y) {
  cpu::MaxPoolForward(ctx_, s, x, y);
}

void CpuBackend::MaxPoolBackward(const Pool2dShape& s, const float* x, const float* dy, float* dx) {
  cpu::MaxPoolBackward(ctx_, s, x, dy, dx);
}

void CpuBackend::AvgPoolForward(const Pool2dShape& s, const float* x, float* y) {
  cpu::AvgPoolForward(ctx_, s, x, y);
}

void CpuBackend::AvgPoolBackward(const Pool2dShape& s, const float* dy, float* dx) {
  cpu::AvgPoolBackward(ctx_, s, dy, dx);
}

void CpuBackend::LrnForward(int n, int c, int hw, const LrnParams& p, const float* x, float* y) {
  cpu::LrnForward(ctx_, n, c, hw, p, x, y);
}

void CpuBackend::LrnBackward(int n, int c, int hw, const LrnParams& p, const float* x,
                             const float* dy, float* dx) {
  cpu::LrnBackward(ctx_, n, c, hw, p, x, dy, dx);
}

void CpuBackend::BatchNormForwardTraining(int n, int c, int hw, float epsilon, const float* x,
                                          const float* gamma, const float* beta, float* y,
                                          float* mean, float* var, float* inv_std) {
  cpu::BatchNormForwardTraining(ctx_, n, c, hw, epsilon, x, gamma, beta, y, mean, var, inv_std);
}

void CpuBackend::BatchNormForwardInference(int n, int c, int hw, float epsilon, const float* x,
                                           const float* gamma, const float* beta, const float* mean,
                                           const float* var, float* y) {
  cpu::BatchNormForwardInference(ctx_, n, c, hw, epsilon, x, gamma, beta, mean, var, y);
}

void CpuBackend::BatchNormBackward(int n, int c, int hw, const float* x, const float* dy,
                                   const float* gamma, const float* mean, const float* inv_std,
                                   float* dx, float* dgamma, float* dbeta) {
  cpu::BatchNormBackward(ctx_, n, c, hw, x, dy, gamma, mean, inv_std, dx, dgamma, dbeta);
}

void CpuBackend::GlobalAvgPoolForward(int n, int c, int hw, const float* x, float* y) {
  cpu::GlobalAvgPoolForward(ctx_, n, c, hw, x, y);
}

void CpuBackend::GlobalAvgPoolBackward(int n, int c, int hw, const float* dy, float* dx) {
  cpu::GlobalAvgPoolBackward(ctx_, n, c, hw, dy, dx);
}

void CpuBackend::Add(int64_t n, const float* a, const float* b, float* y) {
  cpu::Add(ctx_, n, a, b, y);
}

void CpuBackend::CopyColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride,
                             float* y, int64_t y_stride) {
  cpu::CopyColumns(ctx_, rows, width, x, x_stride, y, y_stride);
}

void CpuBackend::AddColumns(int64_t rows, int64_t width, const float* x, int64_t x_stride, float* y,
                            int64_t y_stride) {
  cpu::AddColumns(ctx_, rows, width, x, x_stride, y, y_stride);
}

void CpuBackend::EmbeddingForward(int batch, int fields, int dim, const float* rows,
                                  const uint32_t* index, float* y, int64_t y_stride) {
  cpu::EmbeddingForward(ctx_, batch, fields, dim, rows, index, y, y_stride);
}

void CpuBackend::EmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                                   const uint32_t* positions, const float* dy, int64_t dy_stride,
                                   float* drows) {
  cpu::EmbeddingBackward(ctx_, fields, dim, unique, offsets, positions, dy, dy_stride, drows);
}

void CpuBackend::EmbeddingBagForward(int batch, int dim, const float* rows, const uint32_t* index,
                                     const uint32_t* bags, bool mean, float* y, int64_t y_stride) {
  cpu::EmbeddingBagForward(ctx_, batch, dim, rows, index, bags, mean, y, y_stride);
}

void CpuBackend::EmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                                      const uint32_t* examples, const uint32_t* bags, bool mean,
                                      const float* dy, int64_t dy_stride, float* drows) {
  cpu::EmbeddingBagBackward(ctx_, dim, unique, offsets, examples, bags, mean, dy, dy_stride, drows);
}

void CpuBackend::DotInteractionForward(int batch, int k, int d, const float* x, float* y) {
  cpu::DotInteractionForward(ctx_, batch, k, d, x, y);
}

void CpuBackend::DotInteractionBackward(int batch, int k, int d, const float* x, const float* dy,
                                        float* dx) {
  cpu::DotInteractionBackward(ctx_, batch, k, d, x, dy, dx);
}

}  // namespace towerps::kernels
