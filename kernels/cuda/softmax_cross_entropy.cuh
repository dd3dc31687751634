// The losses on the GPU. Softmax: the loss and gradient half of Backend::SoftmaxCrossEntropy;
// the CUDA backend computes log-softmax with cuDNN (CUDNN_SOFTMAX_LOG, accurate) into a scratch
// buffer, and this kernel turns it into the per-example loss and, optionally, the gradient.
// Sigmoid: Backend::SigmoidCrossEntropy whole, one thread per example; the squared error
// (Backend::SquaredError, regression) likewise.
// Launcher only; device pointers, borrowed; queued on `stream`; the launch is checked.
#ifndef TOWERPS_KERNELS_CUDA_SOFTMAX_CROSS_ENTROPY_CUH_
#define TOWERPS_KERNELS_CUDA_SOFTMAX_CROSS_ENTROPY_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace towerps::kernels::cuda {

// log_probs [batch, classes]; labels[b] in [0, classes) (an out-of-range label traps the
// kernel: a bug, the model checks labels on the host). loss[b] = -log_probs[b, labels[b]].
// dlogits (null: skipped) = (exp(log_probs) - onehot) * grad_scale; it must not alias
// log_probs.
void LaunchSoftmaxCrossEntropyFromLogProbs(int batch, int classes, const float* log_probs,
                                           const int32_t* labels, float grad_scale, float* loss,
                                           float* dlogits, cudaStream_t stream);

// logits [batch]; labels[b] 0 or 1 (anything else traps: the model checks labels on the host).
// loss[b] = max(z, 0) - z * label + log1p(exp(-|z|)); dlogits (null: skipped; may alias logits)
// = (sigmoid(z) - label) * grad_scale.
void LaunchSigmoidCrossEntropy(int batch, const float* logits, const int32_t* labels,
                               float grad_scale, float* loss, float* dlogits, cudaStream_t stream);

// outputs, targets [batch, width]: loss[b] = the sum over j of (outputs - targets)^2, in order;
// doutputs (null: skipped; may alias outputs) = 2 (outputs - targets) * grad_scale.
void LaunchSquaredError(int batch, int width, const float* outputs, const float* targets,
                        float grad_scale, float* loss, float* doutputs, cudaStream_t stream);

}  // namespace towerps::kernels::cuda

#endif  // TOWERPS_KERNELS_CUDA_SOFTMAX_CROSS_ENTROPY_CUH_
