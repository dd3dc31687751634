// ReferenceBackend<T>: Backend<T> over the naive reference ops (reference_ops.h), for float and
// double. Used by tests as ground truth and for double-precision finite-difference checks of
// layers and models. Host memory (HostMemorySpace). Stateless, so thread-compatible.
#ifndef TOWERPS_KERNELS_REFERENCE_REFERENCE_BACKEND_H_
#define TOWERPS_KERNELS_REFERENCE_REFERENCE_BACKEND_H_

#include <string>

#include "kernels/backend.h"
#include "kernels/reference/reference_ops.h"

namespace towerps::kernels {

template <typename T>
class ReferenceBackend final : public Backend<T>, public HostMemorySpace {
 public:
  std::string name() const override { return "reference"; }

  void Gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* a, const T* b, T beta,
            T* c) override {
    reference::Gemm(ta, tb, m, n, k, alpha, a, b, beta, c);
  }
  void BiasAdd(int outer, int channels, int inner, const T* bias, T* y) override {
    reference::BiasAdd(outer, channels, inner, bias, y);
  }
  void BiasBackward(int outer, int channels, int inner, const T* dy, T* db) override {
    reference::BiasBackward(outer, channels, inner, dy, db);
  }
  void Conv2dForward(const Conv2dShape& s, const T* x, const T* w, T* y) override {
    reference::Conv2dForward(s, x, w, y);
  }
  void Conv2dBackwardData(const Conv2dShape& s, const T* dy, const T* w, T* dx) override {
    reference::Conv2dBackwardData(s, dy, w, dx);
  }
  void Conv2dBackwardFilter(const Conv2dShape& s, const T* x, const T* dy, T* dw) override {
    reference::Conv2dBackwardFilter(s, x, dy, dw);
  }
  void MaxPoolForward(const Pool2dShape& s, const T* x, T* y) override {
    reference::MaxPoolForward(s, x, y);
  }
  void MaxPoolBackward(const Pool2dShape& s, const T* x, const T* dy, T* dx) override {
    reference::MaxPoolBackward(s, x, dy, dx);
  }
  void AvgPoolForward(const Pool2dShape& s, const T* x, T* y) override {
    reference::AvgPoolForward(s, x, y);
  }
  void AvgPoolBackward(const Pool2dShape& s, const T* dy, T* dx) override {
    reference::AvgPoolBackward(s, dy, dx);
  }
  void ReluForward(int64_t n, const T* x, T* y) override {
    reference::ActivationForward(reference::Activation::kRelu, n, x, y);
  }
  void ReluBackward(int64_t n, const T* y, const T* dy, T* dx) override {
    reference::ActivationBackward(reference::Activation::kRelu, n, y, dy, dx);
  }
  void TanhForward(int64_t n, const T* x, T* y) override {
    reference::ActivationForward(reference::Activation::kTanh, n, x, y);
  }
  void TanhBackward(int64_t n, const T* y, const T* dy, T* dx) override {
    reference::ActivationBackward(reference::Activation::kTanh, n, y, dy, dx);
  }
  void SigmoidForward(int64_t n, const T* x, T* y) override {
    reference::ActivationForward(reference::Activation::kSigmoid, n, x, y);
  }
  void SigmoidBackward(int64_t n, const T* y, const T* dy, T* dx) override {
    reference::ActivationBackward(reference::Activation::kSigmoid, n, y, dy, dx);
  }
  void LrnForward(int n, int c, int hw, const LrnParams& p, const T* x, T* y) override {
    reference::LrnForward(n, c, hw, p, x, y);
  }
  void LrnBackward(int n, int c, int hw, const LrnParams& p, const T* x, const T* dy,
                   T* dx) override {
    reference::LrnBackward(n, c, hw, p, x, dy, dx);
  }
  void BatchNormForwardTraining(int n, int c, int hw, T epsilon, const T* x, const T* gamma,
                                const T* beta, T* y, T* mean, T* var, T* inv_std) override {
    reference::BatchNormForwardTraining(n, c, hw, epsilon, x, gamma, beta, y, mean, var, inv_std);
  }
  void BatchNormForwardInference(int n, int c, int hw, T epsilon, const T* x, const T* gamma,
                                 const T* beta, const T* mean, const T* var, T* y) override {
    reference::BatchNormForwardInference(n, c, hw, epsilon, x, gamma, beta, mean, var, y);
  }
  void BatchNormBackward(int n, int c, int hw, const T* x, const T* dy, const T* gamma,
                         const T* mean, const T* inv_std, T* dx, T* dgamma, T* dbeta) override {
    reference::BatchNormBackward(n, c, hw, x, dy, gamma, mean, inv_std, dx, dgamma, dbeta);
  }
  void GlobalAvgPoolForward(int n, int c, int hw, const T* x, T* y) override {
    reference::GlobalAvgPoolForward(n, c, hw, x, y);
  }
  void GlobalAvgPoolBackward(int n, int c, int hw, const T* dy, T* dx) override {
    reference::GlobalAvgPoolBackward(n, c, hw, dy, dx);
  }
  void DropoutForward(int64_t n, float rate, uint64_t seed, const T* x, T* mask, T* y) override {
    reference::DropoutForward(n, rate, seed, x, mask, y);
  }
  void DropoutBackward(int64_t n, const T* mask, const T* dy, T* dx) override {
    for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
  }
  void SoftmaxCrossEntropy(int batch, int classes, const T* logits, const int32_t* labels,
                           T grad_scale, T* loss, T* dlogits) override {
    reference::SoftmaxCrossEntropy(batch, classes, logits, labels, grad_scale, loss, dlogits);
  }
  void SigmoidCrossEntropy(int batch, const T* logits, const int32_t* labels, T grad_scale, T* loss,
                           T* dlogits) override {
    reference::SigmoidCrossEntropy(batch, logits, labels, grad_scale, loss, dlogits);
  }
  void SquaredError(int batch, int width, const T* outputs, const T* targets, T grad_scale, T* loss,
                    T* doutputs) override {
    for (int64_t b = 0; b < batch; ++b) {
      double sum = 0;
      for (int64_t j = 0; j < width; ++j) {
        const double e = static_cast<double>(outputs[b * width + j]) - targets[b * width + j];
        sum += e * e;
        if (doutputs != nullptr) doutputs[b * width + j] = static_cast<T>(2 * e * grad_scale);
      }
      loss[b] = static_cast<T>(sum);
    }
  }
  void CopyColumns(int64_t rows, int64_t width, const T* x, int64_t x_stride, T* y,
                   int64_t y_stride) override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < width; ++j) y[r * y_stride + j] = x[r * x_stride + j];
    }
  }
  void AddColumns(int64_t rows, int64_t width, const T* x, int64_t x_stride, T* y,
                  int64_t y_stride) override {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < width; ++j) y[r * y_stride + j] += x[r * x_stride + j];
    }
  }
  void EmbeddingForward(int batch, int fields, int dim, const T* rows, const uint32_t* index, T* y,
                        int64_t y_stride) override {
    for (int64_t p = 0; p < int64_t{batch} * fields; ++p) {
      for (int j = 0; j < dim; ++j) {
        y[(p / fields) * y_stride + (p % fields) * dim + j] = rows[int64_t{index[p]} * dim + j];
      }
    }
  }
  void EmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                         const uint32_t* positions, const T* dy, int64_t dy_stride,
                         T* drows) override {
    for (int64_t u = 0; u < unique; ++u) {
      for (int j = 0; j < dim; ++j) {
        double sum = 0;
        for (uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
          const int64_t p = positions[k];
          sum += dy[(p / fields) * dy_stride + (p % fields) * dim + j];
        }
        drows[u * dim + j] = static_cast<T>(sum);
      }
    }
  }
  void EmbeddingBagForward(int batch, int dim, const T* rows, const uint32_t* index,
                           const uint32_t* bags, bool mean, T* y, int64_t y_stride) override {
    for (int64_t b = 0; b < batch; ++b) {
      const uint32_t n = bags[b + 1] - bags[b];
      for (int j = 0; j < dim; ++j) {
        double sum = 0;
        for (uint32_t k = bags[b]; k < bags[b + 1]; ++k) sum += rows[int64_t{index[k]} * dim + j];
        y[b * y_stride + j] = static_cast<T>(mean && n > 0 ? sum / n : sum);
      }
    }
  }
  void EmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                            const uint32_t* examples, const uint32_t* bags, bool mean, const T* dy,
                            int64_t dy_stride, T* drows) override {
    for (int64_t u = 0; u < unique; ++u) {
      for (int j = 0; j < dim; ++j) {
        double sum = 0;
        for (uint32_t k = offsets[u]; k < offsets[u + 1]; ++k) {
          const int64_t b = examples[k];
          const uint32_t n = bags[b + 1] - bags[b];
          sum += (mean ? 1.0 / n : 1.0) * dy[b * dy_stride + j];
        }
        drows[u * dim + j] = static_cast<T>(sum);
      }
    }
  }
  void DotInteractionForward(int batch, int k, int d, const T* x, T* y) override {
    reference::DotInteractionForward(batch, k, d, x, y);
  }
  void DotInteractionBackward(int batch, int k, int d, const T* x, const T* dy, T* dx) override {
    reference::DotInteractionBackward(batch, k, d, x, dy, dx);
  }
  void Add(int64_t n, const T* a, const T* b, T* y) override {
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
  }
  void Axpy(int64_t n, T alpha, const T* x, T* y) override {
    for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
  }
  void Scale(int64_t n, T alpha, T* y) override {
    for (int64_t i = 0; i < n; ++i) y[i] *= alpha;
  }
  void Fill(int64_t n, T value, T* y) override {
    for (int64_t i = 0; i < n; ++i) y[i] = value;
  }
  void AverageOf(int k, const T* const* in, int64_t n, T* out) override {
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += in[j][i];
      out[i] = static_cast<T>(sum / k);
    }
  }
  void MomentumUpdate(int64_t n, T lr, T momentum, T weight_decay, const T* g, T* v,
                      T* p) override {
    reference::MomentumUpdate(n, lr, momentum, weight_decay, g, v, p);
  }
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_REFERENCE_REFERENCE_BACKEND_H_
