// Elementwise float32 helpers used by the optimizers and by tower-gradient averaging.
// CPU versions: both the CPU backend and the reference the CUDA versions are tested against.
//
// Contract: pointers are borrowed; `n` elements are read/written. Inputs may alias outputs only
// where stated. Thread-compatible (no shared state); the caller picks the threads.
#ifndef TOWERPS_KERNELS_CPU_ELEMENTWISE_H_
#define TOWERPS_KERNELS_CPU_ELEMENTWISE_H_

#include <cstdint>

namespace towerps::kernels::cpu {

// y[i] += alpha * x[i]. x and y must not overlap unless x == y.
void Axpy(int64_t n, float alpha, const float* x, float* y);

// y[i] *= alpha.
void Scale(int64_t n, float alpha, float* y);

// out[i] = (in[0][i] + in[1][i] + ... + in[k-1][i]) / k, summed in index order so that the result
// does not depend on which input arrived first. `out` may alias in[0].
void AverageOf(int k, const float* const* in, int64_t n, float* out);

// SGD with momentum, PyTorch semantics: v[i] = momentum * v[i] + (g[i] + weight_decay * p[i]);
// p[i] -= lr * v[i]. g, v and p must not overlap.
void MomentumUpdate(int64_t n, float lr, float momentum, float weight_decay, const float* g,
                    float* v, float* p);

}  // namespace towerps::kernels::cpu

#endif  // TOWERPS_KERNELS_CPU_ELEMENTWISE_H_
