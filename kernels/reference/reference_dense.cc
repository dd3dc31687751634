// Reference dense algebra, activations, dropout, softmax cross-entropy and the optimizer update.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backend.h"
#include "kernels/reference/reference_ops.h"

namespace towerps::kernels::reference {

template <typename T>
void Gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, const T* b, T beta,
          T* c) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p) {
        const double av = trans_a ? a[int64_t{p} * m + i] : a[int64_t{i} * k + p];
        const double bv = trans_b ? b[int64_t{j} * k + p] : b[int64_t{p} * n + j];
        sum += av * bv;
      }
      T& out = c[int64_t{i} * n + j];
      out = static_cast<T>(double{alpha} * sum + (beta == T(0) ? 0.0 : double{beta} * out));
    }
}

template <typename T>
void BiasAdd(int outer, int channels, int inner, const T* bias, T* y) {
  for (int o = 0; o < outer; ++o)
    for (int ch = 0; ch < channels; ++ch)
      for (int i = 0; i < inner; ++i) y[(int64_t{o} * channels + ch) * inner + i] += bias[ch];
}

template <typename T>
void BiasBackward(int outer, int channels, int inner, const T* dy, T* db) {
  for (int ch = 0; ch < channels; ++ch) {
    double sum = 0;
    for (int o = 0; o < outer; ++o)
      for (int i = 0; i < inner; ++i) sum += dy[(int64_t{o} * channels + ch) * inner + i];
    db[ch] = static_cast<T>(sum);
  }
}

template <typename T>
void ActivationForward(Activation a, int64_t n, const T* x, T* y) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    switch (a) {
      case Activation::kRelu:
        y[i] = static_cast<T>(v > 0 ? v : 0.0);
        break;
      case Activation::kTanh:
        y[i] = static_cast<T>(std::tanh(v));
        break;
      case Activation::kSigmoid:
        y[i] = static_cast<T>(1.0 / (1.0 + std::exp(-v)));
        break;
    }
  }
}

template <typename T>
void ActivationBackward(Activation a, int64_t n, const T* y, const T* dy, T* dx) {
  for (int64_t i = 0; i < n; ++i) {
    const double out = y[i], g = dy[i];
    switch (a) {
      case Activation::kRelu:
        dx[i] = static_cast<T>(out > 0 ? g : 0.0);
        break;
      case Activation::kTanh:
        dx[i] = static_cast<T>(g * (1.0 - out * out));
        break;
      case Activation::kSigmoid:
        dx[i] = static_cast<T>(g * out * (1.0 - out));
        break;
    }
  }
}

template <typename T>
void DropoutForward(int64_t n, float rate, uint64_t seed, const T* x, T* mask, T* y) {
  const double keep_scale = 1.0 / (1.0 - double{rate});
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = DropoutUniform(seed, static_cast<uint64_t>(i)) >= rate;
    mask[i] = static_cast<T>(keep ? keep_scale : 0.0);
    y[i] = static_cast<T>(keep ? double{x[i]} * keep_scale : 0.0);
  }
}

template <typename T>
void SoftmaxCrossEntropy(int batch, int classes, const T* logits, const int32_t* labels,
                         T grad_scale, T* loss, T* dlogits) {
  std::vector<double> row(classes);
  for (int b = 0; b < batch; ++b) {
    const T* l = logits + int64_t{b} * classes;
    double mx = l[0];
    for (int j = 0; j < classes; ++j) mx = std::max(mx, double{l[j]});
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(double{l[j]} - mx);
    const double lse = mx + std::log(sum);
    for (int j = 0; j < classes; ++j) row[j] = l[j];
    loss[b] = static_cast<T>(lse - row[labels[b]]);
    if (dlogits != nullptr) {
      for (int j = 0; j < classes; ++j) {
        const double p = std::exp(row[j] - lse) - (j == labels[b] ? 1.0 : 0.0);
        dlogits[int64_t{b} * classes + j] = static_cast<T>(p * double{grad_scale});
      }
    }
  }
}

template <typename T>
void SigmoidCrossEntropy(int batch, const T* logits, const int32_t* labels, T grad_scale, T* loss,
                         T* dlogits) {
  for (int b = 0; b < batch; ++b) {
    const double z = logits[b];
    const double y = labels[b];
    // -y log p - (1 - y) log(1 - p), p = 1 / (1 + e^-z), in the form that never overflows.
    loss[b] = static_cast<T>(std::max(z, 0.0) - z * y + std::log1p(std::exp(-std::abs(z))));
    if (dlogits != nullptr) {
      dlogits[b] = static_cast<T>((1.0 / (1.0 + std::exp(-z)) - y) * double{grad_scale});
    }
  }
}

template <typename T>
void DotInteractionForward(int batch, int k, int d, const T* x, T* y) {
  const int64_t width = d + int64_t{k} * (k - 1) / 2;
  for (int b = 0; b < batch; ++b) {
    const T* v = x + int64_t{b} * k * d;
    T* out = y + b * width;
    for (int j = 0; j < d; ++j) out[j] = v[j];
    int64_t p = d;
    for (int i = 1; i < k; ++i) {
      for (int j = 0; j < i; ++j, ++p) {
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += double{v[i * d + e]} * v[j * d + e];
        out[p] = static_cast<T>(dot);
      }
    }
  }
}

template <typename T>
void DotInteractionBackward(int batch, int k, int d, const T* x, const T* dy, T* dx) {
  const int64_t width = d + int64_t{k} * (k - 1) / 2;
  std::vector<double> g(static_cast<size_t>(k) * d);
  for (int b = 0; b < batch; ++b) {
    const T* v = x + int64_t{b} * k * d;
    const T* gy = dy + b * width;
    std::fill(g.begin(), g.end(), 0.0);
    for (int j = 0; j < d; ++j) g[j] = gy[j];
    int64_t p = d;
    for (int i = 1; i < k; ++i) {
      for (int j = 0; j < i; ++j, ++p) {  // d dot(v_i, v_j) = v_j dv_i + v_i dv_j
        for (int e = 0; e < d; ++e) {
          g[i * d + e] += double{gy[p]} * v[j * d + e];
          g[j * d + e] += double{gy[p]} * v[i * d + e];
        }
      }
    }
    for (size_t e = 0; e < g.size(); ++e) dx[int64_t{b} * k * d + e] = static_cast<T>(g[e]);
  }
}

template <typename T>
void MomentumUpdate(int64_t n, T lr, T momentum, T weight_decay, const T* g, T* v, T* p) {
  for (int64_t i = 0; i < n; ++i) {
    const double grad = double{g[i]} + double{weight_decay} * p[i];
    v[i] = static_cast<T>(double{momentum} * v[i] + grad);
    p[i] = static_cast<T>(double{p[i]} - double{lr} * v[i]);
  }
}

#define TOWERPS_INSTANTIATE(T)                                                         \
  template void Gemm<T>(bool, bool, int, int, int, T, const T*, const T*, T, T*);      \
  template void BiasAdd<T>(int, int, int, const T*, T*);                               \
  template void BiasBackward<T>(int, int, int, const T*, T*);                          \
  template void ActivationForward<T>(Activation, int64_t, const T*, T*);               \
  template void ActivationBackward<T>(Activation, int64_t, const T*, const T*, T*);    \
  template void DropoutForward<T>(int64_t, float, uint64_t, const T*, T*, T*);         \
  template void SoftmaxCrossEntropy<T>(int, int, const T*, const int32_t*, T, T*, T*); \
  template void SigmoidCrossEntropy<T>(int, const T*, const int32_t*, T, T*, T*);      \
  template void DotInteractionForward<T>(int, int, int, const T*, T*);                 \
  template void DotInteractionBackward<T>(int, int, int, const T*, const T*, T*);      \
  template void MomentumUpdate<T>(int64_t, T, T, T, const T*, T*, T*);
TOWERPS_INSTANTIATE(float)
TOWERPS_INSTANTIATE(double)
#undef TOWERPS_INSTANTIATE

}  // namespace towerps::kernels::reference
