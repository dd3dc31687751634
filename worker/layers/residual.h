// Residual<T>: a block of two branches joined by an add, y = main(x) + shortcut(x) (He et al.
// 2016), the shortcut being the identity when it has no layers (a projection, e.g. a strided
// 1x1 convolution, where the shape changes). Each branch is a chain of layers; the block is one
// layer of the model's chain, so a model stays a sequence of blocks.
//
// Contract: as Layer<T>. The block owns its branches' layers, and the activations and
// gradients between them (in the backend's memory, from Reserve). parameters() lists the main
// branch's parameters, then the shortcut's, each in layer order. Both branches must end in the
// same shape (Create checks).
#ifndef TOWERPS_WORKER_LAYERS_RESIDUAL_H_
#define TOWERPS_WORKER_LAYERS_RESIDUAL_H_

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend_buffer.h"
#include "towerps/result.h"
#include "worker/layers/layer.h"
#include "worker/layers/layer_chain.h"

namespace towerps::worker {

template <typename T>
class Residual final : public Layer<T> {
 public:
  using Chain = std::vector<std::unique_ptr<Layer<T>>>;

  // kInvalidArgument naming the block and both shapes when the branches end differently, or a
  // branch's layers do not chain; `main` must not be empty.
  static Result<std::unique_ptr<Residual>> Create(std::string name, const Shape& input_shape,
                                                  Chain main, Chain shortcut);

  Status Reserve(kernels::Backend<T>& backend, int batch) override;
  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool training) override;
  void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T* y, const T* dy,
                T* dx) override;
  std::string ops() const override;
  std::vector<Parameter<T>*> parameters() override;
  std::vector<Layer<T>*> sublayers() override;
  void SetTrainingStep(uint64_t n) override;

 private:
  // A chain, and its gradient for x before the two are added.
  struct Branch {
    LayerChain<T> chain;
    kernels::BackendBuffer<T> dx;
  };
  Residual(std::string name, const Shape& input_shape, const Shape& output_shape, Chain main,
           Chain shortcut);

  Branch main_, shortcut_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_RESIDUAL_H_
