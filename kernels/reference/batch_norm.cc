// Reference batch normalization and global average pooling: the definitions in
// kernels/backend.h, looped over directly, with double accumulation.
#include <cmath>
#include <vector>

#include "kernels/reference/reference_ops.h"

namespace towerps::kernels::reference {

template <typename T>
void BatchNormForwardTraining(int n, int c, int hw, T epsilon, const T* x, const T* gamma,
                              const T* beta, T* y, T* mean, T* var, T* inv_std) {
  const double m = double{1} * n * hw;
  for (int ch = 0; ch < c; ++ch) {
    double sum = 0;
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < hw; ++i) sum += x[(int64_t{b} * c + ch) * hw + i];
    const double mu = sum / m;
    double sq = 0;
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < hw; ++i) {
        const double d = x[(int64_t{b} * c + ch) * hw + i] - mu;
        sq += d * d;
      }
    const double is = 1.0 / std::sqrt(sq / m + double{epsilon});
    mean[ch] = static_cast<T>(mu);
    var[ch] = static_cast<T>(sq / m);
    inv_std[ch] = static_cast<T>(is);
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < hw; ++i) {
        const int64_t at = (int64_t{b} * c + ch) * hw + i;
        y[at] = static_cast<T>(double{gamma[ch]} * (x[at] - mu) * is + double{beta[ch]});
      }
  }
}

template <typename T>
void BatchNormForwardInference(int n, int c, int hw, T epsilon, const T* x, const T* gamma,
                               const T* beta, const T* mean, const T* var, T* y) {
  for (int b = 0; b < n; ++b)
    for (int ch = 0; ch < c; ++ch) {
      const double is = 1.0 / std::sqrt(double{var[ch]} + double{epsilon});
      for (int i = 0; i < hw; ++i) {
        const int64_t at = (int64_t{b} * c + ch) * hw + i;
        y[at] =
            static_cast<T>(double{gamma[ch]} * (x[at] - double{mean[ch]}) * is + double{beta[ch]});
      }
    }
}

template <typename T>
void BatchNormBackward(int n, int c, int hw, const T* x, const T* dy, const T* gamma, const T* mean,
                       const T* inv_std, T* dx, T* dgamma, T* dbeta) {
  const double m = double{1} * n * hw;
  for (int ch = 0; ch < c; ++ch) {
    const double mu = mean[ch], is = inv_std[ch];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < hw; ++i) {
        const int64_t at = (int64_t{b} * c + ch) * hw + i;
        sum_dy += dy[at];
        sum_dy_xhat += dy[at] * (x[at] - mu) * is;
      }
    const double k = double{gamma[ch]} * is / m;
    for (int b = 0; b < n; ++b)
      for (int i = 0; i < hw; ++i) {
        const int64_t at = (int64_t{b} * c + ch) * hw + i;
        const double xhat = (x[at] - mu) * is;
        dx[at] = static_cast<T>(k * (m * dy[at] - sum_dy - xhat * sum_dy_xhat));
      }
    dgamma[ch] = static_cast<T>(sum_dy_xhat);
    dbeta[ch] = static_cast<T>(sum_dy);
  }
}

template <typename T>
void GlobalAvgPoolForward(int n, int c, int hw, const T* x, T* y) {
  for (int64_t p = 0; p < int64_t{n} * c; ++p) {
    double sum = 0;
    for (int i = 0; i < hw; ++i) sum += x[p * hw + i];
    y[p] = static_cast<T>(sum / hw);
  }
}

template <typename T>
void GlobalAvgPoolBackward(int n, int c, int hw, const T* dy, T* dx) {
  for (int64_t p = 0; p < int64_t{n} * c; ++p)
    for (int i = 0; i < hw; ++i) dx[p * hw + i] = static_cast<T>(double{dy[p]} / hw);
}

#define TOWERPS_INSTANTIATE(T)                                                                  \
  template void BatchNormForwardTraining<T>(int, int, int, T, const T*, const T*, const T*, T*, \
                                            T*, T*, T*);                                        \
  template void BatchNormForwardInference<T>(int, int, int, T, const T*, const T*, const T*,    \
                                             const T*, const T*, T*);                           \
  template void BatchNormBackward<T>(int, int, int, const T*, const T*, const T*, const T*,     \
                                     const T*, T*, T*, T*);                                     \
  template void GlobalAvgPoolForward<T>(int, int, int, const T*, T*);                           \
  template void GlobalAvgPoolBackward<T>(int, int, int, const T*, T*);
TOWERPS_INSTANTIATE(float)
TOWERPS_INSTANTIATE(double)
#undef TOWERPS_INSTANTIATE

}  // namespace towerps::kernels::reference
