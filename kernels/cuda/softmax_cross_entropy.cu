#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch_config.cuh"
#include "kernels/cuda/softmax_cross_entropy.cuh"

namespace towerps::kernels::cuda {

static __global__ void softmax_cross_entropy_kernel(int batch, int classes, const float* log_probs,
                                                    const int32_t* labels, float grad_scale,
                                                    float* loss, float* dlogits) {
  const int64_t total = int64_t{batch} * classes;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int b = static_cast<int>(i / classes);
    const int j = static_cast<int>(i % classes);
    const int label = labels[b];
    if (label < 0 || label >= classes) __trap();
    if (j == label) loss[b] = -log_probs[i];
    if (dlogits != nullptr) {
      dlogits[i] = (expf(log_probs[i]) - (j == label ? 1.0f : 0.0f)) * grad_scale;
    }
  }
}

void LaunchSoftmaxCrossEntropyFromLogProbs(int batch, int classes, const float* log_probs,
                                           const int32_t* labels, float grad_scale, float* loss,
                                           float* dlogits, cudaStream_t stream) {
  const int64_t total = int64_t{batch} * classes;
  if (total == 0) return;
  softmax_cross_entropy_kernel<<<Blocks(total), kThreads, 0, stream>>>(
      batch, classes, log_probs, labels, grad_scale, loss, dlogits);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

static __global__ void sigmoid_cross_entropy_kernel(int batch, const float* logits,
                                                    const int32_t* labels, float grad_scale,
                                                    float* loss, float* dlogits) {
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < batch; b += gridDim.x * blockDim.x) {
    const int label = labels[b];
    if (label != 0 && label != 1) __trap();
    const float z = logits[b];
    loss[b] = fmaxf(z, 0.0f) - z * static_cast<float>(label) + log1pf(expf(-fabsf(z)));
    if (dlogits != nullptr) {
      dlogits[b] = (1.0f / (1.0f + expf(-z)) - static_cast<float>(label)) * grad_scale;
    }
  }
}

void LaunchSigmoidCrossEntropy(int batch, const float* logits, const int32_t* labels,
                               float grad_scale, float* loss, float* dlogits, cudaStream_t stream) {
  if (batch == 0) return;
  sigmoid_cross_entropy_kernel<<<Blocks(batch), kThreads, 0, stream>>>(batch, logits, labels,
                                                                       grad_scale, loss, dlogits);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

static __global__ void squared_error_kernel(int batch, int width, const float* outputs,
                                            const float* targets, float grad_scale, float* loss,
                                            float* doutputs) {
  for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < batch; b += gridDim.x * blockDim.x) {
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

void LaunchSquaredError(int batch, int width, const float* outputs, const float* targets,
                        float grad_scale, float* loss, float* doutputs, cudaStream_t stream) {
  if (batch == 0) return;
  squared_error_kernel<<<Blocks(batch), kThreads, 0, stream>>>(batch, width, outputs, targets,
                                                               grad_scale, loss, doutputs);
  TOWERPS_CUDA_CHECK_LAUNCH();
}

}  // namespace towerps::kernels::cuda
