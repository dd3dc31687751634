// Reference implementations of every Backend op: naive loops that follow the definitions, with
// double accumulation. They are the ground truth the fast kernels are tested against and the
// double-precision path the finite-difference gradient checks run on. Slow by design.
//
// Contract: same shapes, layouts and aliasing rules as kernels/backend.h, whose comments define
// each op. Instantiated for float and double. Thread-compatible; no state.
#ifndef TOWERPS_KERNELS_REFERENCE_REFERENCE_OPS_H_
#define TOWERPS_KERNELS_REFERENCE_REFERENCE_OPS_H_

#include <cstdint>

#include "kernels/shapes.h"

namespace towerps::kernels::reference {

template <typename T>
void Gemm(bool trans_a, bool trans_b, int m, int n, int k, T alpha, const T* a, const T* b, T beta,
          T* c);
template <typename T>
void BiasAdd(int outer, int channels, int inner, const T* bias, T* y);
template <typename T>
void BiasBackward(int outer, int channels, int inner, const T* dy, T* db);

template <typename T>
void Conv2dForward(const Conv2dShape& s, const T* x, const T* w, T* y);
template <typename T>
void Conv2dBackwardData(const Conv2dShape& s, const T* dy, const T* w, T* dx);
template <typename T>
void Conv2dBackwardFilter(const Conv2dShape& s, const T* x, const T* dy, T* dw);

template <typename T>
void MaxPoolForward(const Pool2dShape& s, const T* x, T* y);
template <typename T>
void MaxPoolBackward(const Pool2dShape& s, const T* x, const T* dy, T* dx);
template <typename T>
void AvgPoolForward(const Pool2dShape& s, const T* x, T* y);
template <typename T>
void AvgPoolBackward(const Pool2dShape& s, const T* dy, T* dx);

template <typename T>
void LrnForward(int n, int c, int hw, const LrnParams& p, const T* x, T* y);
template <typename T>
void LrnBackward(int n, int c, int hw, const LrnParams& p, const T* x, const T* dy, T* dx);

template <typename T>
void BatchNormForwardTraining(int n, int c, int hw, T epsilon, const T* x, const T* gamma,
                              const T* beta, T* y, T* mean, T* var, T* inv_std);
template <typename T>
void BatchNormForwardInference(int n, int c, int hw, T epsilon, const T* x, const T* gamma,
                               const T* beta, const T* mean, const T* var, T* y);
template <typename T>
void BatchNormBackward(int n, int c, int hw, const T* x, const T* dy, const T* gamma, const T* mean,
                       const T* inv_std, T* dx, T* dgamma, T* dbeta);
template <typename T>
void GlobalAvgPoolForward(int n, int c, int hw, const T* x, T* y);
template <typename T>
void GlobalAvgPoolBackward(int n, int c, int hw, const T* dy, T* dx);

enum class Activation { kRelu, kTanh, kSigmoid };
template <typename T>
void ActivationForward(Activation a, int64_t n, const T* x, T* y);
template <typename T>
void ActivationBackward(Activation a, int64_t n, const T* y, const T* dy, T* dx);

template <typename T>
void DropoutForward(int64_t n, float rate, uint64_t seed, const T* x, T* mask, T* y);
template <typename T>
void SoftmaxCrossEntropy(int batch, int classes, const T* logits, const int32_t* labels,
                         T grad_scale, T* loss, T* dlogits);
template <typename T>
void SigmoidCrossEntropy(int batch, const T* logits, const int32_t* labels, T grad_scale, T* loss,
                         T* dlogits);
template <typename T>
void DotInteractionForward(int batch, int k, int d, const T* x, T* y);
template <typename T>
void DotInteractionBackward(int batch, int k, int d, const T* x, const T* dy, T* dx);
template <typename T>
void MomentumUpdate(int64_t n, T lr, T momentum, T weight_decay, const T* g, T* v, T* p);

}  // namespace towerps::kernels::reference

#endif  // TOWERPS_KERNELS_REFERENCE_REFERENCE_OPS_H_
