// MomentumSgd: a local SGD-with-momentum update of every variable of a Model<float>, PyTorch
// semantics (v = momentum * v + g + weight_decay * p; p -= lr * v). Used by single-process
// training and the training benchmark; the parameter server applies its own optimizer.
// Variables of kind kMovingAverage (batch norm's moving statistics) are not trained: they move
// toward the statistic in their gradient slot, value = decay * value + (1 - decay) * statistic.
//
// Contract: the model and backend are borrowed and must outlive the optimizer; the model's
// variables must not change shape. Two placements:
//  - a host-memory backend updates the model's host values (value(v), which marks them for
//    upload when the model itself is on a device) from its host gradients;
//  - the model's own device backend updates the values where they are, in device memory
//    (Model::mutable_backend_value, backend_gradient), with the velocity there too: nothing
//    crosses to the host, so pair it with TrainStep(..., GradientDelivery::kBackend). The
//    updates are queued in the backend's stream order after the step's backward.
// Any other backend is kInvalidArgument. Not thread-safe.
#ifndef TOWERPS_WORKER_TRAIN_MOMENTUM_SGD_H_
#define TOWERPS_WORKER_TRAIN_MOMENTUM_SGD_H_

#include <vector>

#include "kernels/backend.h"
#include "kernels/backend_buffer.h"
#include "towerps/result.h"
#include "worker/model/model.h"

namespace towerps::worker {

struct MomentumSgdOptions {
  float learning_rate = 0.01f;  // > 0
  float momentum = 0.9f;        // in [0, 1)
  float weight_decay = 0.0f;    // >= 0
};

class MomentumSgd {
 public:
  // kInvalidArgument naming the bad option.
  static Result<MomentumSgd> Create(Model<float>* model, kernels::Backend<float>* backend,
                                    const MomentumSgdOptions& options);

  // Applies the model's current gradients to its values.
  void Step();
  // Applies variable v's gradient only. Passed as Model::TrainStep's gradient-ready hook it
  // updates each layer while its gradient is still in cache, with the same result as Step()
  // after backward (a layer's values are not read again by the rest of backward).
  void StepVariable(int v);

 private:
  MomentumSgd(Model<float>* model, kernels::Backend<float>* backend,
              const MomentumSgdOptions& options);

  Model<float>* model_;
  kernels::Backend<float>* backend_;
  MomentumSgdOptions options_;
  bool on_device_ = false;                                      // the second placement
  std::vector<std::vector<float>> velocity_;                    // host placement
  std::vector<kernels::BackendBuffer<float>> device_velocity_;  // device placement
};

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_TRAIN_MOMENTUM_SGD_H_
