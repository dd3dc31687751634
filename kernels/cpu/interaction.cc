// CpuBackend column blocks, embedding lookups and DLRM's dot interaction: direct loops,
// examples (rows, for the embedding's gradient) split over the pool. Each example is computed by
// one thread in a fixed order, so results do not depend on the thread count.
#include <cstring>

#include "kernels/cpu/interaction.h"
#include "kernels/embedding_uses.h"

namespace towerps::kernels::cpu {

void CopyColumns(CpuContext& /*ctx*/, int64_t rows, int64_t width, const float* x, int64_t x_stride,
                 float* y, int64_t y_stride) {
  if (width == x_stride && width == y_stride) {
    std::memcpy(y, x, sizeof(float) * static_cast<size_t>(rows * width));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(y + r * y_stride, x + r * x_stride, sizeof(float) * static_cast<size_t>(width));
  }
}

void AddColumns(CpuContext& /*ctx*/, int64_t rows, int64_t width, const float* x, int64_t x_stride,
                float* y, int64_t y_stride) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * x_stride;
    float* out = y + r * y_stride;
    for (int64_t j = 0; j < width; ++j) out[j] += in[j];
  }
}

void EmbeddingForward(CpuContext& ctx, int batch, int fields, int dim, const float* rows,
                      const uint32_t* index, float* y, int64_t y_stride) {
  ctx.ForEachRange(batch, [=](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      for (int f = 0; f < fields; ++f) {
        std::memcpy(y + b * y_stride + int64_t{f} * dim,
                    rows + int64_t{index[b * fields + f]} * dim,
                    sizeof(float) * static_cast<size_t>(dim));
      }
    }
  });
}

void EmbeddingBackward(CpuContext& ctx, int fields, int dim, int64_t unique,
                       const uint32_t* offsets, const uint32_t* positions, const float* dy,
                       int64_t dy_stride, float* drows) {
  ctx.ForEachRange(unique, [=](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      float* out = drows + u * dim;
      std::memset(out, 0, sizeof(float) * static_cast<size_t>(dim));
      for (uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
        const int64_t p = positions[k];
        const float* g = dy + (p / fields) * dy_stride + (p % fields) * dim;
        for (int j = 0; j < dim; ++j) out[j] += g[j];
      }
    }
  });
}

void EmbeddingBagForward(CpuContext& ctx, int batch, int dim, const float* rows,
                         const uint32_t* index, const uint32_t* bags, bool mean, float* y,
                         int64_t y_stride) {
  ctx.ForEachRange(batch, [=](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* out = y + b * y_stride;
      std::memset(out, 0, sizeof(float) * static_cast<size_t>(dim));
      for (uint32_t k = bags[b]; k < bags[b + 1]; ++k) {
        const float* row = rows + int64_t{index[k]} * dim;
        for (int j = 0; j < dim; ++j) out[j] += row[j];
      }
      if (const float s = BagScale(bags, b, mean); s != 1.0f) {
        for (int j = 0; j < dim; ++j) out[j] *= s;
      }
    }
  });
}

void EmbeddingBagBackward(CpuContext& ctx, int dim, int64_t unique, const uint32_t* offsets,
                          const uint32_t* examples, const uint32_t* bags, bool mean,
                          const float* dy, int64_t dy_stride, float* drows) {
  ctx.ForEachRange(unique, [=](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      float* out = drows + u * dim;
      std::memset(out, 0, sizeof(float) * static_cast<size_t>(dim));
      for (uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
        const int64_t b = examples[k];
        const float s = BagScale(bags, b, mean);
        const float* g = dy + b * dy_stride;
        for (int j = 0; j < dim; ++j) out[j] += s * g[j];
      }
    }
  });
}

void DotInteractionForward(CpuContext& ctx, int batch, int k, int d, const float* x, float* y) {
  const int64_t width = d + int64_t{k} * (k - 1) / 2;
  ctx.ForEachRange(batch, [=](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* v = x + b * k * d;
      float* out = y + b * width;
      std::memcpy(out, v, sizeof(float) * static_cast<size_t>(d));
      float* dots = out + d;
      for (int i = 1; i < k; ++i) {
        const float* vi = v + int64_t{i} * d;
        for (int j = 0; j < i; ++j) {
          const float* vj = v + int64_t{j} * d;
          float dot = 0.0f;
          for (int e = 0; e < d; ++e) dot += vi[e] * vj[e];
          *dots++ = dot;
        }
      }
    }
  });
}

void DotInteractionBackward(CpuContext& ctx, int batch, int k, int d, const float* x,
                            const float* dy, float* dx) {
  const int64_t width = d + int64_t{k} * (k - 1) / 2;
  ctx.ForEachRange(batch, [=](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      const float* v = x + b * k * d;
      const float* gy = dy + b * width;
      float* g = dx + b * k * d;
      std::memset(g, 0, sizeof(float) * static_cast<size_t>(k) * d);
      for (int e = 0; e < d; ++e) g[e] = gy[e];
      const float* gdots = gy + d;
      for (int i = 1; i < k; ++i) {
        const float* vi = v + int64_t{i} * d;
        float* gi = g + int64_t{i} * d;
        for (int j = 0; j < i; ++j) {  // d dot(v_i, v_j) = v_j dv_i + v_i dv_j
          const float s = *gdots++;
          const float* vj = v + int64_t{j} * d;
          float* gj = g + int64_t{j} * d;
          for (int e = 0; e < d; ++e) {
            gi[e] += s * vj[e];
            gj[e] += s * vi[e];
          }
        }
      }
    }
  });
}

}  // namespace towerps::kernels::cpu
