#include "kernels/cpu/elementwise.h"

namespace towerps::kernels::cpu {

void Axpy(int64_t n, float alpha, const float* x, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void Scale(int64_t n, float alpha, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
}

void AverageOf(int k, const float* const* in, int64_t n, float* out) {
  const float inv = 1.0f / static_cast<float>(k);
  for (int64_t i = 0; i < n; ++i) {
    float sum = in[0][i];
    for (int j = 1; j < k; ++j) sum += in[j][i];
    out[i] = sum * inv;
  }
}

void MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay, const float* g,
                    float* v, float* p) {
  for (int64_t i = 0; i < n; ++i) {
    v[i] = momentum * v[i] + (g[i] + weight_decay * p[i]);
    p[i] -= lr * v[i];
  }
}

}  // namespace towerps::kernels::cpu
