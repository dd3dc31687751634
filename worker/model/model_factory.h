// The model factory, BuildModel: turns a ModelBuilder description (<towerps/model_builder.h>) into
// a Model<float> for training or a Model<double> for gradient checks, with the same seeded initial
// weights.
//
// Contract: validates the description (input shape, layer shapes that do not fit, duplicate
// names, a last layer that is not a Dense) and returns kInvalidArgument naming the layer. The
// backend is borrowed and must outlive the model. Thread-safe (pure).
#ifndef TOWERPS_WORKER_MODEL_MODEL_FACTORY_H_
#define TOWERPS_WORKER_MODEL_MODEL_FACTORY_H_

#include <cstdint>
#include <memory>

#include "kernels/backend.h"
#include "towerps/model_builder.h"
#include "towerps/result.h"
#include "worker/model/model.h"

namespace towerps::worker {

template <typename T>
Result<std::unique_ptr<Model<T>>> BuildModel(const ModelBuilder& builder,
                                             kernels::Backend<T>* backend, uint64_t seed);

}  // namespace towerps::worker

#endif  // TOWERPS_WORKER_MODEL_MODEL_FACTORY_H_
