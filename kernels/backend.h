// Backend<T>: the neural-network math every compute backend implements. The CPU backend
// (kernels/cpu/cpu_backend.h) implements it for float with OpenBLAS and a thread pool; the
// reference backend (kernels/reference/reference_backend.h) implements it with naive loops for
// float and double; a CUDA backend implements it for float with device pointers and a stream.
//
// Contract:
//  - Every pointer is borrowed and lives in the backend's memory space (host memory for CPU and
//    reference, device memory for CUDA). Dimensions are explicit arguments; nothing is inferred.
//    The MemorySpace base (kernels/memory_space.h) allocates that memory and copies in and out
//    of it; ops and copies are ordered in call order. Ops may return before the work is done
//    (CUDA queues it on a stream); CopyToHost and Synchronize wait for it.
//  - Layouts: matrices are row-major; images are NCHW; convolution weights are [k, c, r, s].
//  - Outputs are overwritten, never accumulated into, unless the op says so (Gemm with beta).
//  - Inputs and outputs must not overlap unless the op says they may.
//  - Shapes are validated by the caller (Conv2dShape::Validate etc.); a bad shape is a bug.
//  - A backend object is not thread-safe: one caller at a time. It may use threads internally.
#ifndef TOWERPS_KERNELS_BACKEND_H_
#define TOWERPS_KERNELS_BACKEND_H_

#include <cstdint>
#include <string>

#include "kernels/dropout_hash.h"  // DropoutUniform, shared with the CUDA kernels
#include "kernels/memory_space.h"
#include "kernels/shapes.h"

namespace towerps::kernels {

template <typename T>
class Backend : public virtual MemorySpace {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // ---- Dense algebra ----
  // C[m, n] = alpha * op(A) * op(B) + beta * C, row-major. op(A) is m x k: A is stored [m, k], or
  // [k, m] when trans_a. op(B) is k x n: B is stored [k, n], or [n, k] when trans_b. beta == 0
  // ignores C's old contents (even NaN).
  virtual void Gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a,
                    const T* b, T beta, T* c) = 0;

  // y[o, ch, i] += bias[ch] for y viewed as [outer, channels, inner]. A matrix [rows, cols] is
  // outer = rows, channels = cols, inner = 1; an NCHW image is outer = n, inner = h * w.
  virtual void BiasAdd(int outer, int channels, int inner, const T* bias, T* y) = 0;
  // db[ch] = sum over o, i of dy[o, ch, i].
  virtual void BiasBackward(int outer, int channels, int inner, const T* dy, T* db) = 0;

  // ---- Convolution (NCHW, weights [k, c, r, s]) ----
  virtual void Conv2dForward(const Conv2dShape& s, const T* x, const T* w, T* y) = 0;
  // dx = gradient of the loss w.r.t. x, given dy.
  virtual void Conv2dBackwardData(const Conv2dShape& s, const T* dy, const T* w, T* dx) = 0;
  // dw = gradient w.r.t. the weights, given x and dy.
  virtual void Conv2dBackwardFilter(const Conv2dShape& s, const T* x, const T* dy, T* dw) = 0;
  // How this backend runs shape s, planned now if it has not seen s ("onednn jit:avx512_core/...",
  // "im2col+sgemm"), for --log-device-placement and --profile; empty when it has one way only.
  virtual std::string Conv2dPlan(const Conv2dShape& /*s*/) { return {}; }

  // ---- Pooling (NCHW) ----
  virtual void MaxPoolForward(const Pool2dShape& s, const T* x, T* y) = 0;
  // Routes dy to the first maximum of each window (recomputed from x); windows may overlap.
  virtual void MaxPoolBackward(const Pool2dShape& s, const T* x, const T* dy, T* dx) = 0;
  virtual void AvgPoolForward(const Pool2dShape& s, const T* x, T* y) = 0;
  virtual void AvgPoolBackward(const Pool2dShape& s, const T* dy, T* dx) = 0;

  // ---- Activations, n elements. y may alias x; dx may alias dy. Backward takes the output y.
  virtual void ReluForward(int64_t n, const T* x, T* y) = 0;
  virtual void ReluBackward(int64_t n, const T* y, const T* dy, T* dx) = 0;
  virtual void TanhForward(int64_t n, const T* x, T* y) = 0;
  virtual void TanhBackward(int64_t n, const T* y, const T* dy, T* dx) = 0;
  virtual void SigmoidForward(int64_t n, const T* x, T* y) = 0;
  virtual void SigmoidBackward(int64_t n, const T* y, const T* dy, T* dx) = 0;

  // ---- Local response normalization across channels (see LrnParams), x [n, c, hw] ----
  virtual void LrnForward(int n, int c, int hw, const LrnParams& p, const T* x, T* y) = 0;
  virtual void LrnBackward(int n, int c, int hw, const LrnParams& p, const T* x, const T* dy,
                           T* dx) = 0;

  // ---- Batch normalization per channel of x [n, c, hw], over the n * hw values of a channel.
  // Training: mean[c] and inv_std[c] = 1 / sqrt(var[c] + epsilon) of this batch, var the biased
  // variance (computed as the mean of (x - mean)^2, not E[x^2] - mean^2), are written out for
  // the backward pass and the moving averages; y = gamma * (x - mean) * inv_std + beta.
  // y must not alias x (backward reads x). epsilon > 0. Reductions run in a fixed order:
  // reruns give the same bits.
  virtual void BatchNormForwardTraining(int n, int c, int hw, T epsilon, const T* x, const T* gamma,
                                        const T* beta, T* y, T* mean, T* var, T* inv_std) = 0;
  // Inference with given statistics (the moving averages): y = gamma * (x - mean) /
  // sqrt(var + epsilon) + beta. y may alias x.
  virtual void BatchNormForwardInference(int n, int c, int hw, T epsilon, const T* x,
                                         const T* gamma, const T* beta, const T* mean, const T* var,
                                         T* y) = 0;
  // The gradient of the training forward, with mean and inv_std as it wrote them: dgamma[c]
  // and dbeta[c] (overwritten) and dx = gamma * inv_std / m * (m * dy - dbeta - xhat * dgamma),
  // xhat = (x - mean) * inv_std, m = n * hw. dx may alias dy.
  virtual void BatchNormBackward(int n, int c, int hw, const T* x, const T* dy, const T* gamma,
                                 const T* mean, const T* inv_std, T* dx, T* dgamma, T* dbeta) = 0;

  // ---- Global average pooling: y[n, c] = the mean of x[n, c, 0..hw); the backward pass spreads
  // dy[n, c] / hw over the hw positions.
  virtual void GlobalAvgPoolForward(int n, int c, int hw, const T* x, T* y) = 0;
  virtual void GlobalAvgPoolBackward(int n, int c, int hw, const T* dy, T* dx) = 0;

  // ---- Dropout (inverted): element i is kept when DropoutUniform(seed, i) >= rate; kept ones
  // are scaled by 1 / (1 - rate). mask[i] receives that factor (0 or 1 / (1 - rate)).
  // 0 <= rate < 1. y may alias x.
  virtual void DropoutForward(int64_t n, float rate, uint64_t seed, const T* x, T* mask, T* y) = 0;
  // dx = dy * mask; dx may alias dy.
  virtual void DropoutBackward(int64_t n, const T* mask, const T* dy, T* dx) = 0;

  // ---- Fused, numerically stable softmax cross-entropy over logits [batch, classes] ----
  // labels[b] in [0, classes) (a bug otherwise). loss[b] = -log softmax(logits[b])[labels[b]].
  // dlogits (may be null) = (softmax - onehot) * grad_scale, e.g. grad_scale = 1 / batch for the
  // mean loss. dlogits may alias logits.
  virtual void SoftmaxCrossEntropy(int batch, int classes, const T* logits, const int32_t* labels,
                                   T grad_scale, T* loss, T* dlogits) = 0;

  // ---- Sigmoid cross-entropy of one logit per example (binary classification) ----
  // labels[b] is 0 or 1 (a bug otherwise). loss[b] = -log sigmoid(z) for 1, -log(1 - sigmoid(z))
  // for 0, computed as max(z, 0) - z * label + log1p(exp(-|z|)), stable for any z. dlogits (may
  // be null) = (sigmoid(z) - label) * grad_scale; it may alias logits.
  virtual void SigmoidCrossEntropy(int batch, const T* logits, const int32_t* labels, T grad_scale,
                                   T* loss, T* dlogits) = 0;

  // ---- Squared error (regression) ----
  // outputs and targets are [batch, width]. loss[b] = the sum over j of (outputs - targets)^2;
  // doutputs (may be null; may alias outputs) = 2 (outputs - targets) * grad_scale.
  virtual void SquaredError(int batch, int width, const T* outputs, const T* targets, T grad_scale,
                            T* loss, T* doutputs) = 0;

  // ---- Column blocks of row-major matrices: a model's branches take and give parts of rows ----
  // For r < rows, j < width: y[r * y_stride + j] = x[r * x_stride + j] (strides in elements).
  // x and y do not overlap.
  virtual void CopyColumns(int64_t rows, int64_t width, const T* x, int64_t x_stride, T* y,
                           int64_t y_stride) = 0;
  // The same, adding: y[r * y_stride + j] += x[r * x_stride + j].
  virtual void AddColumns(int64_t rows, int64_t width, const T* x, int64_t x_stride, T* y,
                          int64_t y_stride) = 0;

  // ---- Embedding lookups: a batch's rows of a table, per example and field ----
  // rows holds a batch's distinct rows (of dim floats); index[b * fields + f] < their count is
  // the row of example b's field f. y[b * y_stride + f * dim + j] = rows[index[.] * dim + j].
  virtual void EmbeddingForward(int batch, int fields, int dim, const T* rows,
                                const uint32_t* index, T* y, int64_t y_stride) = 0;
  // The rows' gradient: drows[u * dim + j] = the sum over row u's uses p = b * fields + f of
  // dy[b * dy_stride + f * dim + j], taken in increasing p, so the result is deterministic. Row
  // u's uses are positions[offsets[u] .. offsets[u + 1]) (kernels/embedding_uses.h makes them
  // from the index). Overwrites drows; a row without uses gets 0.
  virtual void EmbeddingBackward(int fields, int dim, int64_t unique, const uint32_t* offsets,
                                 const uint32_t* positions, const T* dy, int64_t dy_stride,
                                 T* drows) = 0;

  // ---- Embedding bags: a multi-hot field's rows pooled per example ----
  // Example b's ids are uses bags[b] .. bags[b + 1] (bags[0] = 0), and index[k] < the rows' count
  // is use k's row. y[b * y_stride + j] = s_b * the sum of rows[index[k] * dim + j] over b's uses,
  // in order; s_b = 1 / (its use count) when `mean` and it has uses, else 1. An empty bag gives 0.
  virtual void EmbeddingBagForward(int batch, int dim, const T* rows, const uint32_t* index,
                                   const uint32_t* bags, bool mean, T* y, int64_t y_stride) = 0;
  // The rows' gradient: drows[u * dim + j] = the sum over row u's uses of s_b * dy[b * dy_stride +
  // j], b the use's example, taken in increasing use. Row u's uses' examples are
  // examples[offsets[u] .. offsets[u + 1]) (kernels/embedding_uses.h: BagUses). Overwrites
  // drows; a row without uses gets 0.
  virtual void EmbeddingBagBackward(int dim, int64_t unique, const uint32_t* offsets,
                                    const uint32_t* examples, const uint32_t* bags, bool mean,
                                    const T* dy, int64_t dy_stride, T* drows) = 0;

  // ---- DLRM's dot interaction (Naumov et al. 2019) ----
  // x is [batch, k, d]: k vectors of d per example. y is [batch, d + k(k-1)/2]: the first vector
  // as it is, then dot(x_i, x_j) for i = 1..k-1 and j = 0..i-1, i major (DLRM's order: the
  // strict lower triangle of x x^T, row by row).
  virtual void DotInteractionForward(int batch, int k, int d, const T* x, T* y) = 0;
  // dx (overwritten, [batch, k, d]) from dy ([batch, d + k(k-1)/2]) and the forward's x.
  virtual void DotInteractionBackward(int batch, int k, int d, const T* x, const T* dy, T* dx) = 0;

  // ---- Elementwise helpers for optimizers, tower averaging and residual connections ----
  // y = a + b; y may alias a or b.
  virtual void Add(int64_t n, const T* a, const T* b, T* y) = 0;
  // y += alpha * x.
  virtual void Axpy(int64_t n, T alpha, const T* x, T* y) = 0;
  // y *= alpha.
  virtual void Scale(int64_t n, T alpha, T* y) = 0;
  // y = value.
  virtual void Fill(int64_t n, T value, T* y) = 0;
  // out = (in[0] + ... + in[k-1]) / k, summed in index order; out may alias in[0]. `in` is a
  // host array of k pointers into backend memory.
  virtual void AverageOf(int k, const T* const* in, int64_t n, T* out) = 0;
  // SGD with momentum, PyTorch semantics: v = momentum * v + (g + weight_decay * p);
  // p -= lr * v.
  virtual void MomentumUpdate(int64_t n, T lr, T momentum, T weight_decay, const T* g, T* v,
                              T* p) = 0;
};

}  // namespace towerps::kernels

#endif  // TOWERPS_KERNELS_BACKEND_H_
