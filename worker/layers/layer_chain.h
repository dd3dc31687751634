// LayerChain<T>: a sequence of layers and the activations between them, the branch of a block
// (Residual, Join): each layer's input is the previous one's output.
//
// Contract: owns its layers and buffers (in the backend's memory, from Reserve); the caller
// checks that the layers chain. Not thread-safe, as Layer<T>.
#ifndef TOWERPS_WORKER_LAYERS_LAYER_CHAIN_H_
#define TOWERPS_WORKER_LAYERS_LAYER_CHAIN_H_

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend_buffer.h"
#include "worker/layers/layer.h"

namespace towerps::worker {

template <typename T>
class LayerChain {
 public:
  using Layers = std::vector<std::unique_ptr<Layer<T>>>;

  LayerChain() = default;
  explicit LayerChain(Layers layers) : layers_(std::move(layers)), outputs_(layers_.size()) {}

  bool empty() const { return layers_.empty(); }
  const Layers& layers() const { return layers_; }

  // Each layer's own buffers and output for `batch` examples, and two gradient buffers as large
  // as the largest of `input_size` and the outputs.
  Status Reserve(kernels::Backend<T>& backend, int batch, int64_t input_size) {
    int64_t largest = input_size;
    for (size_t i = 0; i < layers_.size(); ++i) {
      TOWERPS_RETURN_IF_ERROR(layers_[i]->Reserve(backend, batch));
      TOWERPS_RETURN_IF_ERROR(outputs_[i].EnsureSize(&backend, batch * layers_[i]->output_size()));
      largest = std::max(largest, layers_[i]->output_size());
    }
    if (layers_.empty()) return Status::Ok();
    for (auto& g : grads_) TOWERPS_RETURN_IF_ERROR(g.EnsureSize(&backend, batch * largest));
    return Status::Ok();
  }
  // Every layer from x; returns the last output (x itself when there are no layers).
  const T* Forward(kernels::Backend<T>& backend, int batch, const T* x, bool training) {
    const T* in = x;
    for (size_t i = 0; i < layers_.size(); ++i) {
      layers_[i]->Forward(backend, batch, in, outputs_[i].data(), training);
      in = outputs_[i].data();
    }
    return in;
  }
  // Backward from the output's gradient dy, given the x of the last Forward: every parameter
  // gradient, and x's gradient into dx (null: not wanted). Without layers nothing is written.
  void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T* dy, T* dx) {
    const T* g = dy;
    for (size_t i = layers_.size(); i-- > 0;) {
      const T* in = i == 0 ? x : outputs_[i - 1].data();
      T* out = i == 0 ? dx : grads_[i % 2].data();
      layers_[i]->Backward(backend, batch, in, outputs_[i].data(), g, out);
      g = out;
    }
  }
  // The layers' ops, "; "-separated, after `prefix`'s.
  std::string ops(std::string prefix = "") const {
    for (const auto& layer : layers_) prefix += (prefix.empty() ? "" : "; ") + layer->ops();
    return prefix;
  }
  void AppendParameters(std::vector<Parameter<T>*>* out) {
    for (auto& layer : layers_) {
      for (Parameter<T>* p : layer->parameters()) out->push_back(p);
    }
  }
  void SetTrainingStep(uint64_t n) {
    for (auto& layer : layers_) layer->SetTrainingStep(n);
  }

 private:
  Layers layers_;
  std::vector<kernels::BackendBuffer<T>> outputs_;  // per layer
  kernels::BackendBuffer<T> grads_[2];              // alternating gradients between layers
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_LAYER_CHAIN_H_
