// Join<T>: a block of branches, each a chain of layers on its own part of the block's input,
// whose outputs are joined into one: added (all the same shape), concatenated, or DLRM's dot
// interaction (Naumov et al. 2019: the outputs cut into vectors of the first branch's size, and
// the first vector followed by every pair's dot product; Backend::DotInteractionForward). A
// model with several inputs is a chain whose first layer is such a block: its branches take the
// model's inputs by name (ModelBuilder::Join), e.g. DLRM's bottom MLP on the dense features
// beside the embedding tables' rows.
//
// A branch's part of the input is a list of column ranges of each example's input row (the
// model's inputs it names, in its order); no ranges means the whole row. A branch without layers
// passes its part through.
//
// Contract: as Layer<T>. The block owns its branches' layers and every buffer between them (in
// the backend's memory, from Reserve). parameters() lists the branches' parameters, branch by
// branch, each in layer order. Create checks that the branches chain and that their outputs can
// be joined, naming the block, the branch and both shapes.
#ifndef TOWERPS_WORKER_LAYERS_JOIN_H_
#define TOWERPS_WORKER_LAYERS_JOIN_H_

#include <memory>
#include <string>
#include <vector>

#include "kernels/backend_buffer.h"
#include "towerps/layer_options.h"
#include "towerps/result.h"
#include "worker/layers/layer.h"
#include "worker/layers/layer_chain.h"

namespace towerps::worker {

template <typename T>
class Join final : public Layer<T> {
 public:
  using Chain = std::vector<std::unique_ptr<Layer<T>>>;
  // Columns [offset, offset + width) of each example's input row.
  struct Columns {
    int64_t offset = 0, width = 0;
  };
  struct BranchParts {
    std::string name;             // for messages: "branch 2 (C1, C2)"
    std::vector<Columns> inputs;  // empty: the whole input row
    Shape input_shape;            // what its first layer takes
    Chain layers;
  };

  static Result<std::unique_ptr<Join>> Create(std::string name, const Shape& input_shape,
                                              JoinKind kind, std::vector<BranchParts> branches);

  Status Reserve(kernels::Backend<T>& backend, int batch) override;
  void Forward(kernels::Backend<T>& backend, int batch, const T* x, T* y, bool training) override;
  void Backward(kernels::Backend<T>& backend, int batch, const T* x, const T* y, const T* dy,
                T* dx) override;
  std::string ops() const override;
  std::vector<Parameter<T>*> parameters() override;
  void SetTrainingStep(uint64_t n) override;

 private:
  struct Branch {
    std::string name;             // as BranchParts
    std::vector<Columns> inputs;  // idem
    LayerChain<T> chain;
    int64_t input_size = 0, output_size = 0;
    int64_t output_offset = 0;        // its columns in the joined row (concat, dot interaction)
    kernels::BackendBuffer<T> input;  // its part of x, gathered (unless it takes the whole row)
    kernels::BackendBuffer<T> dout, dinput;  // its output's gradient, its input's gradient
  };
  Join(std::string name, const Shape& input_shape, const Shape& output_shape, JoinKind kind,
       std::vector<Branch> branches, int vectors, int vector_size);

  // Where the branch's input is: x itself, or its columns gathered into b.input.
  const T* BranchInput(kernels::Backend<T>& backend, int batch, const T* x, Branch& b) const;

  JoinKind kind_;
  std::vector<Branch> branches_;
  int vectors_ = 0, vector_size_ = 0;           // dot interaction: k vectors of d per example
  kernels::BackendBuffer<T> joined_, djoined_;  // the branches' outputs side by side, and grad
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_LAYERS_JOIN_H_
