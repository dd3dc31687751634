#include "worker/train/momentum_sgd.h"

#include <string>

namespace towerps::worker {

Result<MomentumSgd> MomentumSgd::Create(Model<float>* model, kernels::Backend<float>* backend,
                                        const MomentumSgdOptions& o) {
  if (!(o.learning_rate > 0.0f)) {
    return InvalidArgumentError("learning rate " + std::to_string(o.learning_rate) +
                                " must be > 0");
  }
  if (!(o.momentum >= 0.0f && o.momentum < 1.0f)) {
    return InvalidArgumentError("momentum " + std::to_string(o.momentum) + " must be in [0, 1)");
  }
  if (!backend->host_memory()) {
    return InvalidArgumentError(
        "MomentumSgd updates the model's host values and needs a "
        "host-memory backend, not " +
        backend->name());
  }
  if (!(o.weight_decay >= 0.0f)) {
    return InvalidArgumentError("weight decay " + std::to_string(o.weight_decay) + " must be >= 0");
  }
  return MomentumSgd(model, backend, o);
}

MomentumSgd::MomentumSgd(Model<float>* model, kernels::Backend<float>* backend,
                         const MomentumSgdOptions& options)
    : model_(model), backend_(backend), options_(options) {
  for (int v = 0; v < model_->num_variables(); ++v) {
    velocity_.emplace_back(model_->value(v).size(), 0.0f);
  }
}

void MomentumSgd::Step() {
  for (int v = 0; v < model_->num_variables(); ++v) StepVariable(v);
}

void MomentumSgd::StepVariable(int v) {
  auto value = model_->value(v);
  backend_->MomentumUpdate(static_cast<int64_t>(value.size()), options_.learning_rate,
                           options_.momentum, options_.weight_decay, model_->gradient(v).data(),
                           velocity_[v].data(), value.data());
}

}  // namespace towerps::worker
