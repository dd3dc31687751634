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
  void SetTrainingStep(uint64_t n) override;

 private:
  // A chain with its outputs (one buffer per layer) and two gradient buffers to alternate.
  struct Branch {
    Chain layers;
    std::vector<kernels::BackendBuffer<T>> outputs;
    kernels::BackendBuffer<T> grads[2];
    kernels::BackendBuffer<T> dx;  // the branch's gradient for x, before the two are added
  };
  Residual(std::string name, const Shape& input_shape, const Shape& output_shape, Chain main,
           Chain shortcut);
  static Status ReserveBranch(kernels::Backend<T>& backend, int batch, int64_t input_size,
                              Branch& b);
  static const T* ForwardBranch(kernels::Backend<T>& backend, int batch, const T* x, bool training,
                                Branch& b);
  // Backward through the branch from its output gradient dy; its gradient for x goes to dx (null:
  // none wanted; parameter gradients are written either way).
  static void BackwardBranch(kernels::Backend<T>& backend, int batch, const T* x, const T* dy,
                             T* dx, Branch& b);

  Branch main_, shortcut_;
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_RESIDUAL_H_
